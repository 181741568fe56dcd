#!/usr/bin/env bash
# The simulator experiment of docs/modules/simulator.md: 16 peers, Fashion-MNIST MLP, one-peer
# exponential topology, the same hyperparameters for every algorithm, 3 seeds, on the
# homogeneous cluster and on the cluster with peer 0 four times slower.
#   scripts/experiments/sim_baselines.sh [--seeds K]   (about 10 minutes on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/../.."
seeds=3
[ "${1:-}" = "--seeds" ] && seeds="$2"
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" >/dev/null
g=build/release/cli/gossamer
mkdir -p out/experiments
clusters="${CLUSTERS:-homogeneous16 straggler16}"
for cluster in $clusters; do
  out="out/experiments/sim-$cluster"
  echo "== $cluster: 16 peers, one-peer exponential, Fashion-MNIST MLP, $seeds seeds =="
  "$g" sim --topology examples/topologies/one-peer-exp16.json --cluster "examples/clusters/$cluster.json" \
    --config examples/sim/fashion_mlp16.json --seeds "$seeds" --out "$out" --save "$out.json" | tee "$out.txt"
  /usr/bin/python3 scripts/plot.py "$out" --target 0.85
done
