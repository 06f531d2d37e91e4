#!/usr/bin/env bash
# down.sh [--dir DIR] [--keep]: stops the cluster started by up.sh (brokers
# first, with SIGTERM and then SIGKILL after 10 s, then ZooKeeper) and
# removes DIR unless --keep.
set -euo pipefail
dir=${CLUSTER_DIR:-$PWD/.cluster}
keep=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --dir) dir=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    *) echo "usage: $0 [--dir DIR] [--keep]" >&2; exit 2 ;;
  esac
done
[[ -f $dir/state ]] || { echo "no cluster state at $dir/state" >&2; exit 1; }

stop_pids() {
  local pids=("$@") pid
  for pid in "${pids[@]}"; do kill -CONT "$pid" 2>/dev/null || true; kill -TERM "$pid" 2>/dev/null || true; done
  for _ in $(seq 1 100); do
    local alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [[ $alive == 0 ]] && return
    sleep 0.1
  done
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
}

mapfile -t brokers < <(grep '^BROKER_PID_' "$dir/state" | cut -d= -f2)
mapfile -t zks < <(grep '^ZK_PID_' "$dir/state" | cut -d= -f2)
[[ ${#brokers[@]} -gt 0 ]] && stop_pids "${brokers[@]}"
[[ ${#zks[@]} -gt 0 ]] && stop_pids "${zks[@]}"
if [[ $keep == 1 ]]; then rm -f "$dir/state"; else rm -rf "$dir"; fi
echo "cluster stopped"
