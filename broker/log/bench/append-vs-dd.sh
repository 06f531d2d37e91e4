#!/usr/bin/env bash
# append-vs-dd.sh compares the partition log's append throughput with dd
# writing the same bytes, in a way that survives a noisy shared machine:
# for each case (100-byte and 1 KiB records, 16 KiB and 1 MiB batches) and
# each round, it runs BenchmarkAppend for that case (the log and its
# in-process pwrite baseline) and `dd if=/dev/zero` of the same number of
# bytes with the batch size as block size, to new files of 64 MiB (the
# benchmark's round) in the directory the benchmark writes to. The runs of
# a case are back to back and their order alternates between rounds, so
# drifting load hits both sides. It then runs BenchmarkRead for each case.
# It prints per-case medians and the median of the per-round ratios, twice:
# by wall-clock time and by CPU time (user + system) per byte, which time
# spent waiting for a CPU on a busy machine does not inflate. Not part of
# `make test`; run it by hand, under the shared benchmark lock:
#
#   flock /tmp/millrace-bench.lock broker/log/bench/append-vs-dd.sh [ROUNDS] [MIB]
#
# ROUNDS defaults to 5, MIB (bytes written per run) to 1024. The directory is
# $TMPDIR, default /tmp: tmpfs and a disk filesystem give different numbers,
# so both sides always use the same one.
set -euo pipefail

ROUNDS=${1:-5}
MIB=${2:-1024}
export TMPDIR=${TMPDIR:-/tmp}
export LC_ALL=C

ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
WORK=$(mktemp -d "$TMPDIR/millrace-append-vs-dd.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

echo "building the broker/log test binary" >&2
(cd "$ROOT" && go test -c -o "$WORK/log.test" ./broker/log)
# The benchmarks run in the package directory, as `go test` runs them.
cd "$ROOT/broker/log"

echo "dir $TMPDIR ($(df -T "$TMPDIR" | awk 'NR == 2 { print $2 }')), $(nproc) cores, load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

# bench PATTERN N: runs the benchmarks matching PATTERN for N iterations
# and prints "name MB/s cpu-MB/s B/batch" per result line.
bench() {
	"$WORK/log.test" -test.run '^$' -test.bench "$1" -test.benchtime "$2x" |
		awk '/^Benchmark/ { mbs = 0; cpu = 0; bb = 0
			for (i = 2; i <= NF; i++) {
				if ($i == "MB/s") mbs = $(i-1)
				if ($i == "cpu-MB/s") cpu = $(i-1)
				if ($i == "B/batch") bb = $(i-1)
			}
			sub(/-[0-9]+$/, "", $1); print $1, mbs, cpu, bb }'
}

# cpu_of ERRFILE CMD...: the CPU time (user + system, seconds) CMD takes;
# CMD's standard error goes to ERRFILE.
cpu_of() {
	local TIMEFORMAT='%3U %3S' err=$1 t
	shift
	t=$({ time "$@" 2>"$err"; } 2>&1)
	awk -v t="$t" 'BEGIN { split(t, c, " "); print c[1] + c[2] }'
}

# dd_mbs BS COUNT: writes COUNT blocks of BS bytes with dd, a new file per
# 64 MiB as the benchmark starts a new log or file per appendRound (64 MiB:
# on this machine a single file of a GiB costs dd several times the CPU per
# byte, as dirty pages pile up), and prints dd's own rate (its timing leaves
# out starting the process) and the rate per CPU second, in MB/s. For the
# latter, the CPU time of a dd that writes nothing (about 10 ms of starting
# the process here) is taken off each run.
dd_mbs() {
	local per=$(((64 << 20) / $1)) left=$2 c idle busy
	: >"$WORK/dd.runs"
	while ((left > 0)); do
		c=$((left < per ? left : per))
		idle=$(cpu_of "$WORK/dd.err" dd if=/dev/zero of="$WORK/dd.out" bs="$1" count=0)
		rm -f "$WORK/dd.out"
		busy=$(cpu_of "$WORK/dd.err" dd if=/dev/zero of="$WORK/dd.out" bs="$1" count="$c")
		rm -f "$WORK/dd.out"
		echo "$(tail -1 "$WORK/dd.err") cpu $busy $idle" >>"$WORK/dd.runs"
		left=$((left - c))
	done
	# Lines: "<bytes> bytes (...) copied, <seconds> s, <rate> cpu <busy> <idle>".
	awk '{ for (i = 1; i <= NF; i++) { if ($i == "copied,") s += $(i+1); if ($i == "cpu") c += $(i+1) - $(i+2) }; b += $1 }
		END { printf "%.1f %.1f\n", b / s / 1e6, b / c / 1e6 }' "$WORK/dd.runs"
}

RESULTS=$WORK/results # lines: case kind round MB/s cpu-MB/s
: >"$RESULTS"
CASES="record=100/batch=16KiB record=100/batch=1024KiB record=1024/batch=16KiB record=1024/batch=1024KiB"

# The batch size of each case, for N and dd's block size.
declare -A BATCH
while read -r name _ _ bb; do
	BATCH[${name#BenchmarkAppend/}]=${bb%.*}
done < <(bench '^BenchmarkAppend$/^record=(100|1024)$/^batch=(16|1024)KiB$/^pwrite$' 1)

for round in $(seq "$ROUNDS"); do
	for c in $CASES; do
		bs=${BATCH[$c/pwrite]}
		n=$(((MIB << 20) / bs))
		rec=${c%%/*}
		batch=${c#*/}
		run_go() {
			bench "^BenchmarkAppend\$/^${rec}\$/^${batch}\$" "$n" | while read -r name mbs cpu _; do
				case $name in
				*/pwrite) echo "$c pwrite $round $mbs $cpu" ;;
				*) echo "$c append $round $mbs $cpu" ;;
				esac
			done >>"$RESULTS"
		}
		run_dd() { echo "$c dd $round $(dd_mbs "$bs" "$n")" >>"$RESULTS"; }
		if ((round % 2)); then run_go; run_dd; else run_dd; run_go; fi
	done
	echo "round $round/$ROUNDS done, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
done

for round in $(seq "$ROUNDS"); do
	for c in $CASES; do
		bench "^BenchmarkRead\$/^${c%%/*}\$/^${c#*/}\$" 2000 | while read -r _ mbs cpu _; do
			echo "$c read $round $mbs $cpu"
		done >>"$RESULTS"
	done
done

echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
# Medians per case and kind, and the median of the per-round ratios
# append/dd and append/pwrite; column 4 is wall clock, column 5 CPU time.
summary() {
	awk -v col="$1" -v rounds="$ROUNDS" -v cases="$CASES" '
	function median(a, n,    i, j, t) {
		for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
		return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
	}
	function med(c, kind,    r, a, n) {
		n = 0
		for (r = 1; r <= rounds; r++) if ((c, kind, r) in v) a[++n] = v[c, kind, r]
		return n ? median(a, n) : 0
	}
	function medratio(c, kind,    r, a, n) {
		n = 0
		for (r = 1; r <= rounds; r++) if (v[c, kind, r] > 0) a[++n] = v[c, "append", r] / v[c, kind, r]
		return n ? median(a, n) : 0
	}
	{ v[$1, $2, $3] = $col }
	END {
		printf "%-26s %10s %10s %10s %9s %9s %10s\n", "case", "append", "pwrite", "dd", "app/dd", "app/pw", "read"
		split(cases, cs, " ")
		for (i = 1; i in cs; i++) {
			c = cs[i]
			printf "%-26s %10.0f %10.0f %10.0f %9.2f %9.2f %10.0f\n", c, med(c, "append"), med(c, "pwrite"), med(c, "dd"), medratio(c, "dd"), medratio(c, "pwrite"), med(c, "read")
		}
	}' "$RESULTS"
}
echo "wall clock: median MB/s, median of per-round ratios"
summary 4
echo
echo "CPU time: median MB per CPU second, median of per-round ratios"
summary 5
echo
echo "per round (case kind round MB/s cpu-MB/s):"
sort -k1,1 -k2,2 -k3,3n "$RESULTS"
