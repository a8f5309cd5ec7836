#!/usr/bin/env bash
# Runs a 3-node Raft cluster of throttled on this machine, in the foreground:
#
#   examples/cluster/raft.sh [folder]
#
# Nodes n1, n2, n3 take clients on 127.0.0.1:6380, 6381 and 6382 and talk
# Raft on 7001, 7002 and 7003; each keeps its data in folder/n1... (default
# ./cluster-data). Any node serves any client:
#
#   redis-cli -p 6381 CL.THROTTLE user123 15 30 60
#   redis-cli -p 6380 RAFT MEMBERS
#
# Ctrl-C stops all three. Run it again on the same folder and the cluster
# comes back with its state (later starts ignore --peers).
set -euo pipefail
cd "$(dirname "$0")/../.."
data="${1:-cluster-data}"
mkdir -p "$data"
go build -o "$data/throttled" ./cmd/throttled

peers=n1=127.0.0.1:7001,n2=127.0.0.1:7002,n3=127.0.0.1:7003
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait' EXIT INT TERM
for i in 1 2 3; do
  "$data/throttled" --replication raft --node-id "n$i" \
    --cluster-addr "127.0.0.1:700$i" --port "638$((i - 1))" --dir "$data/n$i" \
    --peers "$peers" &
  pids+=($!)
done
wait
