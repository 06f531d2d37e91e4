#!/usr/bin/env bash
# Beacon throughput with Debian's wrk: a broker and a beacon on loopback,
# then wrk POSTing batches of 10 click events. Prints wrk's report (requests/s
# and latency percentiles); events/s = requests/s x 10.
#   agents/beacon/bench/run.sh [DURATION] [CONNECTIONS]
set -euo pipefail
cd "$(dirname "$0")/../../.."
duration=${1:-20s}
conns=${2:-32}
make -s build
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; wait; rm -rf "$work"' EXIT
bin/millrace broker --listen 127.0.0.1:19392 --data "$work/broker" 2>"$work/broker.log" &
sleep 1
bin/millrace topic create clicks --partitions 3 -b 127.0.0.1:19392 >/dev/null
cat >"$work/beacon.yaml" <<YAML
beacon:
  topic: clicks
  rate_limit: -1   # one client IP: no per-IP limit in a benchmark
YAML
bin/millrace beacon -b 127.0.0.1:19392 --listen 127.0.0.1:19393 --config "$work/beacon.yaml" 2>"$work/beacon.log" &
sleep 1
wrk -t2 -c"$conns" -d"$duration" --latency -s agents/beacon/bench/wrk-post.lua http://127.0.0.1:19393
