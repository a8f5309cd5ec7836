#!/usr/bin/env bash
# Runs a 3-node active-active (CRDT) mesh of throttled on this machine, in
# the foreground:
#
#   examples/cluster/crdt.sh [folder]
#
# Nodes a, b, c take clients on 127.0.0.1:6380, 6381 and 6382 and exchange
# their changes on 7101, 7102 and 7103; each keeps its data in folder/a...
# (default ./mesh-data). Every node answers at once, from its own state:
#
#   redis-cli -p 6381 CL.THROTTLE user123 15 30 60
#   redis-cli -p 6380 CRDT PEERS
#
# Ctrl-C stops all three. Run it again on the same folder and each node
# comes back with its state, under a new incarnation.
set -euo pipefail
cd "$(dirname "$0")/../.."
data="${1:-mesh-data}"
mkdir -p "$data"
go build -o "$data/throttled" ./cmd/throttled

peers=a=127.0.0.1:7101,b=127.0.0.1:7102,c=127.0.0.1:7103
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait' EXIT INT TERM
i=0
for id in a b c; do
  "$data/throttled" --replication crdt --node-id "$id" \
    --cluster-addr "127.0.0.1:710$((i + 1))" --port "638$i" --dir "$data/$id" \
    --peers "$peers" &
  pids+=($!)
  i=$((i + 1))
done
wait
