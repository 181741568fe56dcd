#!/usr/bin/env bash
# Issue 7's experiment (docs/results/experiments.md, "Real peers beside the simulator"): 8 real local
# peers (gossamer launch) in the demo setting (peer 0 four times slower) and with two slow peers,
# beside gossamer sim of the calibrated cluster file. About 12 minutes on 2 cores.
# Real peers evaluate their own models on the whole test set (10,000 samples) every 2 s, as sim
# evaluates the exact average every 2 virtual seconds: the same samples on both sides.
# Sim also evaluates each peer's own model on the same 10,000 samples, so that its "mean of the
# peers' accuracies" is measured as the real peers measure theirs (time_to_target_peer_mean).
# Usage: scripts/experiments/real_vs_sim.sh [OUT]   (GOSSAMER=path/to/gossamer to pick a build;
# SIM_ONLY=1 keeps the real runs already in OUT and reruns the calibrated sim alone)
set -euo pipefail
cd "$(dirname "$0")/../.."
g=${GOSSAMER:-build/release/cli/gossamer}
out=${1:-out/experiments/real}
cfg=examples/launch/fashion_mlp8.json
topo=examples/topologies/ring8.json
algos=allreduce,dpsgd,async
interval=2
mkdir -p "$out"
if [ "${SIM_ONLY:-0}" != 1 ]; then
  "$g" bench calibrate --config "$cfg" --peers 8 --out "$out/calibrated.json"
fi
for setting in straggler8 straggler8-two; do
  cluster=examples/clusters/$setting.json
  mkdir -p "$out/$setting"
  /usr/bin/python3 scripts/experiments/calibrated_cluster.py "$cluster" "$out/calibrated.json" \
    --peers 8 --cores "$(nproc)" > "$out/$setting/predicted.json"
  if [ "${SIM_ONLY:-0}" != 1 ]; then
    echo "== $setting: real peers =="
    "$g" launch --topology "$topo" --config "$cfg" --cluster "$cluster" --algorithms "$algos" \
      --eval-interval "$interval" --eval-samples 10000 --out "$out/$setting/real"
  fi
  echo "== $setting: gossamer sim of the calibrated cluster file =="
  "$g" sim --topology "$topo" --config "$cfg" --cluster "$out/$setting/predicted.json" \
    --algorithms "$algos" --eval-interval "$interval" --peer-eval-samples 10000 \
    --out "$out/$setting/sim" \
    --save "$out/$setting/sim.json"
done
/usr/bin/python3 scripts/experiments/real_vs_sim.py "$out" straggler8 straggler8-two \
  | tee "$out/table.md"
