#!/usr/bin/env bash
# The simulator experiments of issue 27 (docs/results/experiments.md, "lsgd and qallreduce"): one
# gossamer sim per algorithm and cluster, one after the other (each about 2-3 minutes on 2
# busy cores), seed 1. GOSSAMER=path/to/gossamer to use another build; RUNS="a b" for a subset.
set -euo pipefail
cd "$(dirname "$0")/../.."
g=${GOSSAMER:-build/release/cli/gossamer}
cfg=examples/sim/fashion_mlp16_issue27.json
out=out/experiments/issue27
runs=${RUNS:-"straggler:dpsgd straggler:async straggler:lsgd homogeneous:allreduce homogeneous:qallreduce homogeneous:lsgd homogeneous:dpsgd"}
mkdir -p "$out"
for r in $runs; do
  cluster=${r%%:*} algo=${r#*:}
  echo "== $algo on ${cluster}16 =="
  "$g" sim --topology examples/topologies/one-peer-exp16.json \
    --cluster "examples/clusters/${cluster}16.json" --config "$cfg" --algorithms "$algo" \
    --seeds 1 --out "$out/$cluster-$algo" --save "$out/$cluster-$algo/summary.json" |
    tee "$out/$cluster-$algo.txt"
done
