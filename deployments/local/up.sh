#!/usr/bin/env bash
# up.sh N [--zk 1|3] [--dir DIR] [--bin PATH] [--racks R1,R2,...] [--metrics] [--set name=value]...
#
# Starts a local millrace cluster on loopback: a ZooKeeper (one node, or a
# three-node ensemble) from Debian's zookeeper package and N brokers, each
# with its own data directory under DIR (default ./.cluster). Addresses and
# process IDs go to DIR/state (shell-sourceable); the bootstrap servers and
# the ZooKeeper connect string are printed. down.sh stops everything;
# `millrace cluster restart N --dir DIR` starts broker N again (after a
# kill, or stopping it first) with the command line in BROKER_CMD_N.
#
# Extra --set options are passed to every broker (e.g. --set
# replica.lag.time.max.ms=3000). --racks gives broker i the i-th rack
# (broker.rack; racks are reused in turn when there are fewer than
# brokers). --metrics serves each broker's Prometheus /metrics on a port of
# its own (BROKER_METRICS_N in the state file). Ports are chosen free at
# start.
set -euo pipefail

usage() { echo "usage: $0 N [--zk 1|3] [--dir DIR] [--bin PATH] [--racks R1,R2,...] [--metrics] [--set name=value]..." >&2; exit 2; }
[[ $# -ge 1 && $1 =~ ^[1-9][0-9]*$ ]] || usage
brokers=$1; shift
zk_nodes=1
dir=${CLUSTER_DIR:-$PWD/.cluster}
bin=${MILLRACE:-}
sets=()
racks=()
metrics=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --zk) zk_nodes=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --set) sets+=(--set "$2"); shift 2 ;;
    --racks) IFS=, read -r -a racks <<<"$2"; shift 2 ;;
    --metrics) metrics=1; shift ;;
    *) usage ;;
  esac
done
[[ $zk_nodes == 1 || $zk_nodes == 3 ]] || { echo "--zk must be 1 or 3" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
if [[ -z $bin ]]; then
  bin=$(command -v millrace || true)
  [[ -n $bin ]] || bin=$here/../../bin/millrace
fi
[[ -x $bin ]] || { echo "millrace binary not found at $bin (make build, or --bin PATH)" >&2; exit 1; }
[[ -f /usr/share/java/zookeeper.jar ]] || { echo "ZooKeeper not installed: apt-get install -y zookeeper" >&2; exit 1; }
if [[ -f $dir/state ]]; then echo "$dir/state exists: a cluster is running there (down.sh first)" >&2; exit 1; fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

# free_port asks the kernel for a free loopback port.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# zk_ok probes a ZooKeeper node with the ruok four-letter word.
zk_ok() {
  local reply
  reply=$( (exec 3<>/dev/tcp/127.0.0.1/"$1" && printf ruok >&3 && timeout 1 cat <&3) 2>/dev/null || true)
  [[ $reply == imok ]]
}

state=$dir/state.tmp
: >"$state"
echo "CLUSTER_DIR=$dir" >>"$state"
zk_connect=""
peer_ports=()
for i in $(seq 1 "$zk_nodes"); do
  peer_ports+=("$(free_port) $(free_port)")
done
for i in $(seq 1 "$zk_nodes"); do
  zdir=$dir/zk$i
  mkdir -p "$zdir/data"
  port=$(free_port)
  {
    echo "tickTime=500"
    echo "dataDir=$zdir/data"
    echo "clientPortAddress=127.0.0.1"
    echo "clientPort=$port"
    echo "admin.enableServer=false"
    echo "4lw.commands.whitelist=ruok,srvr,stat,mntr"
    echo "maxClientCnxns=0"
    echo "maxSessionTimeout=60000"
    echo "minSessionTimeout=1000"
    if [[ $zk_nodes -gt 1 ]]; then
      echo "initLimit=10"
      echo "syncLimit=5"
      for j in $(seq 1 "$zk_nodes"); do
        read -r p1 p2 <<<"${peer_ports[$((j-1))]}"
        echo "server.$j=127.0.0.1:$p1:$p2"
      done
    fi
  } >"$zdir/zoo.cfg"
  echo "$i" >"$zdir/data/myid"
  java -Xmx256m -cp /usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar \
    org.apache.zookeeper.server.quorum.QuorumPeerMain "$zdir/zoo.cfg" >"$zdir/zk.log" 2>&1 &
  echo "ZK_PID_$i=$!" >>"$state"
  echo "ZK_PORT_$i=$port" >>"$state"
  zk_connect+="${zk_connect:+,}127.0.0.1:$port"
done
echo "ZK_NODES=$zk_nodes" >>"$state"
echo "ZK_CONNECT=$zk_connect" >>"$state"
mv "$state" "$dir/state"

for i in $(seq 1 "$zk_nodes"); do
  port=$(grep "^ZK_PORT_$i=" "$dir/state" | cut -d= -f2)
  for _ in $(seq 1 100); do zk_ok "$port" && break; sleep 0.1; done
  zk_ok "$port" || { echo "ZooKeeper node $i did not start; see $dir/zk$i/zk.log" >&2; exit 1; }
done

bootstrap=""
for id in $(seq 1 "$brokers"); do
  bdir=$dir/broker$id
  mkdir -p "$bdir"
  port=$(free_port)
  own=()
  if [[ ${#racks[@]} -gt 0 ]]; then
    own+=(--set "broker.rack=${racks[$(( (id-1) % ${#racks[@]} ))]}")
  fi
  if [[ $metrics == 1 ]]; then
    mport=$(free_port)
    own+=(--metrics-listen "127.0.0.1:$mport")
    echo "BROKER_METRICS_$id=127.0.0.1:$mport" >>"$dir/state"
  fi
  "$bin" broker --id "$id" --zookeeper "$zk_connect" --listen "127.0.0.1:$port" --data "$bdir/data" "${own[@]}" "${sets[@]}" \
    >"$bdir/broker.log" 2>&1 &
  echo "$!" >"$bdir/broker.pid"
  {
    echo "BROKER_PID_$id=$!"
    echo "BROKER_PORT_$id=$port"
    echo "BROKER_CMD_$id=\"$bin broker --id $id --zookeeper $zk_connect --listen 127.0.0.1:$port --data $bdir/data ${own[*]} ${sets[*]}\""
  } >>"$dir/state"
  bootstrap+="${bootstrap:+,}127.0.0.1:$port"
done
echo "BROKERS=$brokers" >>"$dir/state"
echo "BOOTSTRAP=$bootstrap" >>"$dir/state"

for id in $(seq 1 "$brokers"); do
  port=$(grep "^BROKER_PORT_$id=" "$dir/state" | cut -d= -f2)
  for _ in $(seq 1 100); do (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null && break; sleep 0.1; done
  (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null || { echo "broker $id did not start; see $dir/broker$id/broker.log" >&2; exit 1; }
done
echo "zookeeper: $zk_connect"
echo "bootstrap: $bootstrap"
echo "state:     $dir/state"
