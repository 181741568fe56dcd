#!/usr/bin/env bash
# The main job, runnable on a fresh machine: installs dependencies, builds, then (until real peers
# exist) simulates 16 peers training the Fashion-MNIST MLP on a cluster where peer 0 is four times
# slower, comparing synchronous gossip (dpsgd) and wait-free gossip with straggler-aware weights
# (async) with the all-reduce baseline: a printed table, out/demo/accuracy.png
# and out/demo/idle.png. It first shows the analysis of the example topologies.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
g=build/release/cli/gossamer
out=out/demo
rm -rf "$out"
mkdir -p "$out"

echo
echo "== The example topologies (examples/topologies): how fast each averages, what it sends =="
"$g" topo show examples/topologies/*.json

echo
echo "== 16 simulated peers, Fashion-MNIST MLP, one-peer exponential graph, peer 0 four times slower =="
echo "   (virtual time; the same hyperparameters and data order for every algorithm; about 2 minutes)"
"$g" sim --topology examples/topologies/one-peer-exp16.json \
  --cluster examples/clusters/straggler16.json --config examples/sim/fashion_mlp16.json \
  --algorithms allreduce,dpsgd,async --epochs 5 --out "$out" --save "$out/summary.json"
# Debian's interpreter, the one python3-matplotlib belongs to (not a python3 earlier on PATH).
/usr/bin/python3 scripts/plot.py "$out" --target 0.85
echo "summary: $out/summary.json; plots: $out/accuracy.png, $out/idle.png"
