#!/usr/bin/env bash
# tail-vs-kcat.sh ships one log file (1 GiB by default, lines of 100–200
# bytes) to a real `millrace broker` with `millrace tail` and with Debian's
# `kcat -P -l` (one message per line), alternating, ROUNDS times (default
# 3), and prints lines/s, MB/s, the ratio tail/kcat of each round and the
# medians, the tailer's peak RSS while shipping, and its RSS while the
# broker is down. Rounds alternate because this machine's speed drifts by
# a third between minutes: a ratio is only fair between neighbouring runs.
# Not part of `make test`; run it by hand:
#
#   [ROUNDS=N] agents/tail/bench/tail-vs-kcat.sh [SIZE_MIB] [COMPRESSION...]
#
# Each run gets its own one-partition topic, so both tools write to one
# partition (tail keys a file's lines by host:path, which is one partition
# anyway). kcat runs with librdkafka's defaults (acks=all, no compression,
# 5 ms linger); tail runs with its defaults (acks=all, idempotent, 5 ms
# linger) and the compressions given (default: none lz4).
set -euo pipefail

SIZE_MIB=${1:-1024}
ROUNDS=${ROUNDS:-3}
shift || true
COMPRESSIONS=("$@")
[ ${#COMPRESSIONS[@]} -gt 0 ] || COMPRESSIONS=(none lz4)

ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
WORK=$(mktemp -d /tmp/millrace-tailbench.XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT

command -v kcat >/dev/null || { echo "kcat is needed: apt-get install -y kcat" >&2; exit 1; }
echo "building millrace" >&2
(cd "$ROOT" && go build -o "$WORK/millrace" ./pipeline/cmd/millrace)
BIN=$WORK/millrace

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# The log file: a timestamped line with a counter and 0–99 bytes of padding.
FILE=$WORK/big.log
echo "writing a ${SIZE_MIB} MiB log file" >&2
awk -v size=$((SIZE_MIB * 1024 * 1024)) 'BEGIN {
	pad = "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuv"
	while (n < size) {
		line = sprintf("2026-11-25T10:00:00.%06dZ INFO request id=%d path=/api/v1/items/%d status=200 took=%dms %s", i % 1000000, i, i % 977, i % 250, substr(pad, 1, i % 100))
		print line
		n += length(line) + 1
		i++
	}
}' >"$FILE"
LINES=$(wc -l <"$FILE")
BYTES=$(stat -c %s "$FILE")
echo "file: $BYTES bytes, $LINES lines" >&2

BROKER_PORT=$(free_port)
BROKER=127.0.0.1:$BROKER_PORT
start_broker() {
	"$BIN" broker --listen "$BROKER" --data "$WORK/broker" --id 1 >>"$WORK/broker.log" 2>&1 &
	BROKER_PID=$!
	PIDS+=("$BROKER_PID")
	for _ in $(seq 100); do
		"$BIN" topic list -b "$BROKER" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "broker did not start" >&2
	cat "$WORK/broker.log" >&2
	exit 1
}
start_broker

metric() { # metric ADDR NAME -> value (0 if absent)
	{ curl -s "http://$1/metrics" || true; } | awk -v n="$2" '$1 == n { printf "%d\n", $2; found = 1 } END { if (!found) print 0 }'
}
# from_disk drops the millrace binary from the page cache. The Go linker
# writes its output through a memory map, and a binary it has just written
# showed 30 MiB of file-backed RSS in the tailer where the same binary
# copied into place, or read back from disk, showed 26 MiB: the kernel maps
# the cached pages around each page a program touches, and how many depends
# on how the file came into the cache. Every tailer here starts from disk
# (written back first: the page cache keeps dirty pages).
from_disk() {
	python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$BIN"
}
rss_kib() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }
hwm_kib() { awk '/^VmHWM/ { print $2 }' "/proc/$1/status"; }
# cpu_s PID: user+system CPU seconds the process has used so far.
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.2f\n", ($12 + $13) / hz }' "/proc/$1/stat"; }

now() { date +%s.%N; }

# poll_tail METRICS_ADDR PID TOPIC sets SENT (records of TOPIC the broker acknowledged) and
# RSS (KiB) with bash builtins alone. The loop runs 20 times a second beside
# the tailer, and kcat's run has no such observer: starting curl, awk and
# sleep each time took CPU from the two cores the tailer runs on.
exec {NAP}<> <(:) # never readable: read -t on it is a sleep without a process
poll_tail() {
	local line host=${1%:*} port=${1##*:}
	SENT=0 RSS=0
	if { exec {fd}<>"/dev/tcp/$host/$port"; } 2>/dev/null; then
		printf 'GET /metrics HTTP/1.0\r\n\r\n' >&"$fd"
		while IFS= read -r line <&"$fd"; do
			if [[ $line == "millrace_ship_records_sent_total{topic=\"$3\"} "* ]]; then
				printf -v SENT '%.0f' "${line#* }"
			fi
		done
		exec {fd}<&-
	fi
	while read -r line; do
		if [[ $line == VmRSS:* ]]; then
			line=${line#VmRSS:}
			RSS=${line% kB}
			RSS=${RSS//[[:space:]]/}
		fi
	done <"/proc/$2/status"
}
report() { # report NAME SECONDS
	awk -v name="$1" -v s="$2" -v l="$LINES" -v b="$BYTES" 'BEGIN {
		printf "%-22s %8.2f s %12.0f lines/s %9.1f MB/s\n", name, s, l / s, b / s / 1e6 }'
}

# median: the middle of the numbers on stdin (the upper one of an even count).
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int(NR / 2) + 1] }'; }

# kcat: one message per line, exits once every message is delivered.
run_kcat() { # run_kcat ROUND
	local topic=kcat-$1
	"$BIN" topic create "$topic" --partitions 1 -b "$BROKER" >/dev/null
	b0=$(cpu_s "$BROKER_PID")
	t0=$(now)
	kcat -P -b "$BROKER" -t "$topic" -l "$FILE"
	t1=$(now)
	b1=$(cpu_s "$BROKER_PID")
	KCAT_S=$(echo "$t1 - $t0" | bc -l)
	echo "$KCAT_S" >>"$WORK/kcat.s"
	report "kcat -P -l" "$KCAT_S"
	echo "  CPU seconds: broker $(echo "$b1 - $b0" | bc -l)"
}

run_tail() { # run_tail ROUND COMPRESSION
	local comp=$2 topic=tail-$2-$1
	"$BIN" topic create "$topic" --partitions 1 -b "$BROKER" >/dev/null
	maddr=127.0.0.1:$(free_port)
	printf 'ship:\n  compression: %s\ntail:\n  host: bench\n' "$comp" >"$WORK/agent-$comp.yaml"
	from_disk
	b0=$(cpu_s "$BROKER_PID")
	t0=$(now)
	"$BIN" tail -b "$BROKER" --topic "$topic" --data "$WORK/data-$topic" --config "$WORK/agent-$comp.yaml" \
		--metrics-listen "$maddr" "$FILE" >>"$WORK/tail-$comp.log" 2>&1 &
	TAIL_PID=$!
	PIDS+=("$TAIL_PID")
	peak=0
	while :; do
		kill -0 "$TAIL_PID" || { echo "millrace tail exited early:" >&2; cat "$WORK/tail-$comp.log" >&2; exit 1; }
		poll_tail "$maddr" "$TAIL_PID" "$topic"
		[ "$RSS" -gt "$peak" ] && peak=$RSS
		[ "$SENT" -ge "$LINES" ] && break
		read -rt 0.05 -u "$NAP" || true
	done
	t1=$(now)
	b1=$(cpu_s "$BROKER_PID")
	tcpu=$(cpu_s "$TAIL_PID")
	hwm=$(hwm_kib "$TAIL_PID")
	kill -TERM "$TAIL_PID"
	wait "$TAIL_PID" || true
	S=$(echo "$t1 - $t0" | bc -l)
	echo "$S" >>"$WORK/tail-$comp.s"
	echo "$KCAT_S / $S" | bc -l >>"$WORK/ratio-$comp"
	echo "$hwm" >>"$WORK/hwm-$comp"
	awk -v c="$tcpu" -v l="$LINES" 'BEGIN { printf "%.3f\n", c / l * 1e6 }' >>"$WORK/cpu-$comp"
	report "millrace tail ($comp)" "$S"
	awk -v k="$KCAT_S" -v s="$S" -v p="$peak" -v h="$hwm" 'BEGIN {
		printf "  ratio tail/kcat (lines/s): %.2f   peak RSS: %.1f MiB (sampled), %.1f MiB (VmHWM)\n", k / s, p / 1024, h / 1024 }'
	echo "  CPU seconds: tail $tcpu, broker $(echo "$b1 - $b0" | bc -l)"
}

for round in $(seq "$ROUNDS"); do
	echo "round $round of $ROUNDS" >&2
	run_kcat "$round"
	for comp in "${COMPRESSIONS[@]}"; do run_tail "$round" "$comp"; done
done
echo "medians of $ROUNDS rounds:"
report "kcat -P -l" "$(median <"$WORK/kcat.s")"
for comp in "${COMPRESSIONS[@]}"; do
	report "millrace tail ($comp)" "$(median <"$WORK/tail-$comp.s")"
	printf "  ratio tail/kcat %.2f (rounds: %s), tailer CPU %.2f µs per line, VmHWM %.1f MiB\n" \
		"$(median <"$WORK/ratio-$comp")" "$(awk '{ printf "%s%.2f", (NR > 1 ? " " : ""), $1 }' "$WORK/ratio-$comp")" \
		"$(median <"$WORK/cpu-$comp")" "$(median <"$WORK/hwm-$comp" | awk '{ print $1 / 1024 }')"
done

# Broker down: the tailer reads until its producer buffer is full, then
# must hold still. Once with the tail command's default buffer (12 MiB) and
# once with each size in DOWN_BUFFERS_MIB (default 16, the producer's
# general default).
echo "broker down: stopping it and tailing the file from the start" >&2
kill -TERM "$BROKER_PID"
wait "$BROKER_PID" 2>/dev/null || true
for buf in default ${DOWN_BUFFERS_MIB-16}; do
	cfg=()
	if [ "$buf" != default ]; then
		printf 'ship:\n  max_buffered_bytes: %d\n' $((buf * 1024 * 1024)) >"$WORK/down-$buf.yaml"
		cfg=(--config "$WORK/down-$buf.yaml")
	fi
	maddr=127.0.0.1:$(free_port)
	from_disk
	"$BIN" tail -b "$BROKER" --topic down --data "$WORK/data-down-$buf" --metrics-listen "$maddr" "${cfg[@]}" "$FILE" >>"$WORK/tail-down.log" 2>&1 &
	TAIL_PID=$!
	PIDS+=("$TAIL_PID")
	sleep 20
	read_lines=$(metric "$maddr" millrace_tail_lines_read_total)
	buffered=$(metric "$maddr" millrace_ship_buffered_bytes)
	echo "broker down 20s, buffer $buf: RSS $(($(rss_kib "$TAIL_PID") / 1024)) MiB, VmHWM $(($(hwm_kib "$TAIL_PID") / 1024)) MiB," \
		"RssFile $(awk '/^RssFile/ { print int($2 / 1024) }' "/proc/$TAIL_PID/status") MiB," \
		"buffered $((buffered / 1024 / 1024)) MiB, lines read $read_lines of $LINES"
	# It waits for acknowledgements that cannot come: do not wait for it.
	kill -KILL "$TAIL_PID"
	wait "$TAIL_PID" 2>/dev/null || true
done
