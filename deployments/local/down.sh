#!/usr/bin/env bash
# down.sh [--dir DIR] [--keep]: stops the cluster started by up.sh (brokers
# first, with SIGTERM and then SIGKILL after 10 s, then ZooKeeper) and
# removes DIR unless --keep. Every broker of DIR is stopped, also one
# restarted with `millrace cluster restart` or by hand from BROKER_CMD_N:
# besides the process IDs of the state file and of brokerN/broker.pid, any
# process whose command line uses one of DIR's data directories (--data
# DIR/brokerN/data) or ZooKeeper configurations counts. Nothing is deleted
# while one of them still runs.
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
dir=$(cd "$dir" && pwd) # as up.sh wrote it into the command lines

stop_pids() {
  local pids=("$@") pid
  for pid in "${pids[@]}"; do kill -CONT "$pid" 2>/dev/null || true; kill -TERM "$pid" 2>/dev/null || true; done
  for _ in $(seq 1 100); do
    [[ -z $(alive_pids "${pids[@]}") ]] && return
    sleep 0.1
  done
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for _ in $(seq 1 50); do
    [[ -z $(alive_pids "${pids[@]}") ]] && return
    sleep 0.1
  done
}

# alive_pids PID...: those of the given processes that still run (a zombie,
# exited and not yet collected, does not).
alive_pids() {
  local pid state
  for pid in "$@"; do
    [[ $pid =~ ^[0-9]+$ ]] || continue
    state=$(sed -n 's/^.*) \(.\).*$/\1/p' "/proc/$pid/stat" 2>/dev/null || true)
    [[ -n $state && $state != Z ]] && echo "$pid"
  done
  return 0
}

# cmdline PID: the process's arguments joined by spaces (empty once gone),
# read without starting a process per PID.
cmdline() {
  local args=()
  mapfile -d '' -t args 2>/dev/null <"/proc/$1/cmdline" || true
  echo "${args[*]}"
}

# pids_using TEXT: processes whose command line contains TEXT, this script
# and its subshells aside.
pids_using() {
  local f pid
  for f in /proc/[0-9]*/cmdline; do
    pid=${f#/proc/}; pid=${pid%/cmdline}
    [[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
    [[ $(cmdline "$pid") == *"$1"* ]] && echo "$pid"
  done
  return 0
}

# broker_pids: every broker of the cluster that still runs.
broker_pids() {
  {
    grep '^BROKER_PID_' "$dir/state" | cut -d= -f2
    cat "$dir"/broker*/broker.pid 2>/dev/null || true
  } | sort -u | while read -r pid; do
    # A recorded ID is a broker of this cluster only while its command line
    # says so: the ID may have been reused since.
    [[ $(cmdline "$pid") == *"--data $dir/broker"* ]] && echo "$pid"
  done
  pids_using "--data $dir/broker"
}

zk_pids() {
  grep '^ZK_PID_' "$dir/state" | cut -d= -f2
  pids_using "QuorumPeerMain $dir/zk"
}

for what in broker zk; do
  mapfile -t pids < <("${what}_pids" | sort -u)
  mapfile -t pids < <(alive_pids "${pids[@]}")
  [[ ${#pids[@]} -gt 0 ]] && stop_pids "${pids[@]}"
  mapfile -t left < <("${what}_pids" | sort -u)
  mapfile -t left < <(alive_pids "${left[@]}")
  if [[ ${#left[@]} -gt 0 ]]; then
    echo "processes of the cluster still run (${left[*]}): $dir is left in place" >&2
    exit 1
  fi
done
if [[ $keep == 1 ]]; then rm -f "$dir/state"; else rm -rf "$dir"; fi
echo "cluster stopped"
