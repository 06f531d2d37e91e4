# millrace build, run and test entry points. `make run` and `make test` are the
# two commands a new user needs; both install what is missing first.

GO        ?= go
BIN       := bin/millrace
SUDO      := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Debian packages the tests need: real Kafka clients for interop tests (and
# librdkafka's C headers with gcc, for the e2e tests' small C producer;
# python3-zstandard, kafka-python's zstd codec), a real ZooKeeper,
# Chromium for the browser tests, PostgreSQL for the Iceberg SQL
# catalog's tests (sinks/iceberg starts its own server), and Avro and
# requests for confluent-kafka's schema registry client and its (legacy)
# Avro producer. Prometheus, whose remote_write the e2e tests point at
# millrace (they start their own server; the package's service is not used).
# rsyslog, with the gtls TLS driver of rsyslog-gnutls, is a sender for the
# syslog receiver's tests, which run rsyslogd with their own configuration;
# nothing here enables or starts Debian's services (on a systemd host apt
# starts rsyslog with Debian's local-only configuration, which the tests
# neither use nor disturb). logger comes from bsdutils, which is Essential
# and always installed.
APT_PACKAGES := kcat python3-kafka python3-zstandard python3-confluent-kafka librdkafka-dev gcc zookeeper chromium postgresql python3-avro python3-requests prometheus rsyslog rsyslog-gnutls
# npm packages of the e2e tests (KafkaJS and its Confluent schema registry
# client), installed into .bin/node.
NPM_PACKAGES := kafkajs@2.2.4 @kafkajs/confluent-schema-registry@4.1.0
# Tools built from Go modules into .bin/ (not on the user's PATH, not in git).
VERSITYGW := .bin/versitygw
# The OpenTelemetry Collector's load generator, the e2e tests' OTLP sender.
TELEMETRYGEN := .bin/telemetrygen
TELEMETRYGEN_VERSION := v0.161.0
# Staticcheck, at a release that knows the Go version of go.mod.
STATICCHECK_VERSION := v0.8.2
STATICCHECK := .bin/staticcheck-$(STATICCHECK_VERSION)
# Extra flags for `go test`, e.g. make test TESTFLAGS='-run Crash -v'.
TESTFLAGS ?=

.PHONY: all build run test bench lint fmt deps deps-run clean cluster cluster-down

all: build

build:
	$(GO) build -o $(BIN) ./pipeline/cmd/millrace

run: deps-run build
	./$(BIN) up --config deployments/demo/millrace.yaml

# Every test, after the lint. Unit and component tests run with the race
# detector; the e2e tests drive real processes (built without it) and real
# clients.
test: deps lint
	$(GO) test -race -count=1 -timeout 20m $(TESTFLAGS) $$($(GO) list ./... | grep -v '/e2e$$')
	$(GO) test -count=1 -timeout 40m $(TESTFLAGS) ./e2e/...

# The benchmarks of the data path and the parts it runs through: the
# record batch codec, the partition log, the Kafka server's produce and
# fetch, the group coordinator, client quotas, tiered storage's remote
# reads, the schema registry and its client, the sinks. One short run of each (BENCHTIME) so the whole finishes in a few
# minutes; for medians to compare before and after a change, e.g. make
# bench BENCHCOUNT=5 BENCHTIME=1s (docs/benchmarks.md).
BENCH_PKGS = ./internal/recordbatch/ ./broker/log/ ./broker/kafka/ ./broker/group/ ./broker/quota/ ./broker/tier/ ./schemas/srclient/ ./schemas/registry/ ./sinks/...
BENCHTIME ?= 100ms
BENCHCOUNT ?= 1
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count $(BENCHCOUNT) -timeout 30m $(BENCH_PKGS)

# gofmt, vet, staticcheck, and go.mod/go.sum as
# `go mod tidy` would write them.
lint: $(STATICCHECK)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; }

fmt:
	gofmt -w $$(git ls-files '*.go')

# What `make run` needs: Go and the modules.
deps-run:
	@command -v $(GO) >/dev/null || { echo "deps: Go 1.26 is required (https://go.dev/dl), not found on PATH"; exit 1; }
	$(GO) mod download

# Everything the tests need too. Installs only what is missing: apt packages
# (via sudo when not root) and Go-built tools in .bin/. telemetrygen takes
# about 10 minutes to build cold, so it builds in the background while apt
# runs; either failing fails the target.
deps: deps-run $(STATICCHECK)
	@tg=""; if [ ! -x $(TELEMETRYGEN) ]; then \
		echo "deps: building telemetrygen $(TELEMETRYGEN_VERSION) (OTLP sender for tests, ~10 min once) in the background"; \
		GOBIN=$(CURDIR)/.bin $(GO) install github.com/open-telemetry/opentelemetry-collector-contrib/cmd/telemetrygen@$(TELEMETRYGEN_VERSION) & tg=$$!; \
	fi; \
	missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "deps: installing$$missing"; \
		if ! { $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; }; then \
			[ -z "$$tg" ] || { kill $$tg; wait $$tg; }; exit 1; \
		fi; \
	fi; \
	if [ -n "$$tg" ] && ! wait $$tg; then echo "deps: building telemetrygen failed"; exit 1; fi
	@[ -d .bin/node/node_modules/@kafkajs/confluent-schema-registry ] || { echo "deps: installing$(foreach p,$(NPM_PACKAGES), $(p)) (npm)"; \
		npm install --silent --no-audit --no-fund --prefix .bin/node $(NPM_PACKAGES); }
	@[ -x $(VERSITYGW) ] || { echo "deps: building versitygw (S3 server for tests, ~3 min once)"; \
		GOBIN=$(CURDIR)/.bin $(GO) install github.com/versity/versitygw/cmd/versitygw@v1.8.0; }

# The version is in the file name, so raising STATICCHECK_VERSION builds the
# new one.
$(STATICCHECK):
	@echo "deps: building staticcheck $(STATICCHECK_VERSION)"
	@mkdir -p .bin/staticcheck.tmp
	GOBIN=$(CURDIR)/.bin/staticcheck.tmp $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv .bin/staticcheck.tmp/staticcheck $@ && rmdir .bin/staticcheck.tmp

# A local three-broker cluster on loopback with one ZooKeeper
# (deployments/local/up.sh; the e2e cluster tests use the same script).
cluster: build
	CLUSTER_DIR=$(CURDIR)/.cluster MILLRACE=$(CURDIR)/$(BIN) deployments/local/up.sh 3

cluster-down:
	CLUSTER_DIR=$(CURDIR)/.cluster deployments/local/down.sh

clean:
	rm -rf bin
