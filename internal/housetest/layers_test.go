package housetest

import (
	"slices"
	"strings"
	"testing"
)

// A layer is a set of packages and the layers they may import; packages of
// one layer may import each other. The table is docs/architecture.md §1's
// rules written as an allow-list: an import the table does not allow is an
// upward (or sideways) import and fails TestLayers.
type layer struct {
	name string
	// pkgs are package paths; "x/..." is x and everything below it.
	pkgs []string
	// may names the layers this one may import; "*" is every layer.
	may []string
	// testMay names the further layers its test files may import, each
	// with its reason beside the layer.
	testMay []string
}

var layers = []layer{
	// Leaves every layer may use: small helpers, the event schemas (and
	// schemas/otel, the OTLP schemas' rows), and the schema languages of
	// the registry (schemas/format and one package per language), which
	// the registry, the sinks and the CLI share.
	{name: "base", pkgs: []string{"internal/...", "schemas", "schemas/otel", "schemas/format/..."}},
	// The schema registry: its rules and HTTP surface over the schema
	// languages; the broker hosts it.
	{name: "registry", pkgs: []string{"schemas/registry"}, may: []string{"base"}},
	// The registry's client: what sinks, agents and the CLI use the
	// registry through, over HTTP only; its tests start a registry.
	{name: "srclient", pkgs: []string{"schemas/srclient"}, may: []string{"base"}, testMay: []string{"srtest"}},
	// An in-process registry for the tests of the client's users.
	{name: "srtest", pkgs: []string{"schemas/srclient/srtest"}, may: []string{"registry", "base"}},
	// Object stores (a file tree or an S3 bucket): the lake's files and
	// the broker's tiered segments are kept through the same layer.
	{name: "store", pkgs: []string{"store/..."}, may: []string{"base"}},
	// The partition log knows nothing of the network, the coordination
	// store or the lake.
	{name: "log", pkgs: []string{"broker/log"}, may: []string{"base"}},
	// Replication decisions are pure: no I/O, no project imports.
	// Its property test wires the controller's elections (broker/cluster)
	// around the machines, as the broker does.
	{name: "replica", pkgs: []string{"broker/replica"}, testMay: []string{"state"}},
	// The coordination interface and its backends.
	{name: "coord", pkgs: []string{"broker/coord/..."}, may: []string{"base"}},
	// Cluster state written once against broker/coord.Store.
	{name: "state", pkgs: []string{"broker/cluster", "broker/group", "broker/acl", "broker/users", "broker/txn", "broker/quota"}, may: []string{"coord", "log", "base"}},
	// The replica manager: partitions led and followed, the high
	// watermark, the acks=all wait; it carries out broker/replica's
	// decisions against the cluster state and the logs.
	{name: "replication", pkgs: []string{"broker/replication"}, may: []string{"tier", "state", "coord", "log", "replica", "base"}},
	// Tiered storage: uploads, the remote state (in the coordination
	// store), remote reads and their cache.
	{name: "tier", pkgs: []string{"broker/tier"}, may: []string{"store", "coord", "log", "base"}},
	// What a broker sends another broker: one client pool (TLS, SASL) and
	// the replica fetchers, which follow for the replica manager.
	{name: "interbroker", pkgs: []string{"broker/interbroker"}, may: []string{"replication", "state", "log", "replica", "base"}},
	// The wire server. Its tests put tiered segments in a file store.
	{name: "wire", pkgs: []string{"broker/kafka"}, may: []string{"tier", "interbroker", "replication", "state", "coord", "log", "replica", "base"}, testMay: []string{"store"}},
	// What the schema registry is hosted on: its log on the _schemas topic
	// (a Kafka client), its election on the coordination store, its
	// authentication on the broker's users and ACLs. Its tests start an
	// in-process broker as a fixture.
	{name: "registryhost", pkgs: []string{"schemas/registry/kafkalog", "schemas/registry/election", "schemas/registry/brokerauth"}, may: []string{"registry", "state", "coord", "base"}, testMay: []string{"broker"}},
	// A broker process: wiring of everything below.
	{name: "broker", pkgs: []string{"broker"}, may: []string{"tier", "store", "registryhost", "registry", "wire", "interbroker", "replication", "state", "coord", "log", "replica", "base"}},
	// Audit counts: imported by agents and sinks, so it imports neither.
	{name: "audit", pkgs: []string{"audit/..."}, may: []string{"base"}},
	// Agents publish through Kafka clients only: no broker, no sink code.
	{name: "agents", pkgs: []string{"agents/..."}, may: []string{"audit", "srclient", "base"}, testMay: []string{"srtest"}},
	// Sinks read through Kafka clients and import nothing of the broker:
	// the batch validation they share with it is internal/recordbatch, in
	// the base. Their tests may start an in-process broker as a fixture.
	{name: "sinks", pkgs: []string{"sinks/..."}, may: []string{"audit", "srclient", "store", "base"}, testMay: []string{"broker", "srtest"}},
	// Applications: only pipeline/* sees every layer.
	{name: "pipeline", pkgs: []string{"pipeline/..."}, may: []string{"*"}},
	// Packages of tests only (no non-test files).
	{name: "tests", pkgs: []string{"e2e", "deployments"}, may: []string{"*"}},
}

// testHelpers are packages for tests only: no non-test file imports them,
// so nothing of a test's fixtures reaches the binary.
var testHelpers = []string{
	"internal/waitfor", "internal/zktest", "internal/pgtest", "internal/s3test", "broker/coord/coordtest",
	"store/storetest", "sinks/parquet/parquettest", "internal/recordbatch/batchtest", "sinks/lakeread/tabletest",
	"schemas/srclient/srtest",
}

// layerOf returns the layer holding path, the most specific match winning
// ("broker/log" over a "broker/..." pattern, were there one).
func layerOf(path string) (layer, bool) {
	var best layer
	bestLen := -1
	for _, l := range layers {
		for _, p := range l.pkgs {
			n, ok := matchLen(p, path)
			if ok && n > bestLen {
				best, bestLen = l, n
			}
		}
	}
	return best, bestLen >= 0
}

// matchLen reports whether pattern matches path and how specific it is.
func matchLen(pattern, path string) (int, bool) {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return len(base), path == base || strings.HasPrefix(path, base+"/")
	}
	return len(pattern) + 1, path == pattern // an exact name beats a pattern of the same stem
}

// allowed reports whether a package of layer from may import one of layer
// to; inTest, whether from's test files may.
func allowed(from, to layer, inTest bool) bool {
	if inTest && slices.Contains(from.testMay, to.name) {
		return true
	}
	return from.name == to.name || slices.Contains(from.may, "*") || slices.Contains(from.may, to.name)
}

// TestLayers fails on every import the layer table does not allow, and on a
// package no layer holds (a new package must be placed in a layer, here and
// in docs/architecture.md §1). Test files' imports are held to the same
// rules plus the layer's testMay.
func TestLayers(t *testing.T) {
	for _, p := range listPackages(t) {
		from, ok := layerOf(p.Path)
		if !ok {
			t.Errorf("package %s is in no layer: add it to the layers table in %s and to docs/architecture.md §1", p.Path, "internal/housetest/layers_test.go")
			continue
		}
		check := func(imports []string, inTest bool) {
			for _, imp := range imports {
				to, ok := layerOf(imp)
				if !ok {
					continue // reported as a package of its own
				}
				if !allowed(from, to, inTest) {
					kind, may := "", from.may
					if inTest {
						kind, may = " in a test", append(slices.Clone(may), from.testMay...)
					}
					t.Errorf("upward import%s: %s (layer %s) imports %s (layer %s); %s may import only %v",
						kind, p.Path, from.name, imp, to.name, from.name, may)
				}
			}
		}
		// A helper may use another (pgtest waits with waitfor): it reaches
		// no binary either.
		for _, imp := range p.Imports {
			if slices.Contains(testHelpers, imp) && !slices.Contains(testHelpers, p.Path) {
				t.Errorf("%s imports the test helper %s outside its tests", p.Path, imp)
			}
		}
		check(p.Imports, false)
		check(p.TestImports, true)
	}
}

// TestLayersRejectUpwardImports proves the checker is not vacuous: the
// edges the rules forbid are refused, and the ones they keep are allowed.
func TestLayersRejectUpwardImports(t *testing.T) {
	for _, c := range []struct {
		from, to string
		inTest   bool
		ok       bool
	}{
		{"broker/log", "broker/coord", false, false},
		{"broker/log", "broker/kafka", false, false},
		{"broker/replica", "internal/durable", false, false},
		{"broker/cluster", "broker/kafka", false, false},
		{"audit", "agents/ship", false, false},
		{"audit", "store", false, false},
		{"broker/log", "store", false, false},
		{"agents/tail", "sinks/parquet", false, false},
		{"agents/ship", "broker/log", false, false},
		{"sinks/lake", "broker/kafka", false, false},
		{"sinks/lake", "broker/log", false, false},
		{"sinks/lake", "internal/recordbatch", false, true},
		{"broker/log", "internal/recordbatch", false, true},
		{"sinks/lake", "pipeline/monitor", false, false},
		{"broker/kafka", "pipeline/reconcile", false, false},
		{"internal/durable", "broker/log", false, false},
		{"broker/log", "internal/durable", false, true},
		{"broker/kafka", "broker/replica", false, true},
		{"sinks/lake", "audit", false, true},
		{"agents/beacon", "agents/intake", false, true},
		{"pipeline/reconcile", "store", false, true},
		{"sinks/lake", "store", false, true},
		{"pipeline/cli", "broker", false, true},
		{"sinks/lake", "broker", false, false},
		{"sinks/lake", "broker", true, true},
		{"sinks/lake", "pipeline/appliance", true, false},
		{"broker/replica", "broker/cluster", false, false},
		{"broker/replica", "broker/cluster", true, true},
		{"schemas/srclient", "schemas/registry", false, false},
		{"agents/beacon", "schemas/registry", false, false},
		{"sinks/lake", "schemas/registry", false, false},
		{"agents/beacon", "schemas/srclient", false, true},
		{"sinks/lake", "schemas/srclient", false, true},
	} {
		from, ok1 := layerOf(c.from)
		to, ok2 := layerOf(c.to)
		if !ok1 || !ok2 {
			t.Fatalf("%s or %s is in no layer", c.from, c.to)
		}
		if got := allowed(from, to, c.inTest); got != c.ok {
			t.Errorf("%s -> %s (in a test: %v) allowed = %v, want %v", c.from, c.to, c.inTest, got, c.ok)
		}
	}
}
