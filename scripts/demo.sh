#!/usr/bin/env bash
# The main job, runnable on a fresh machine: installs dependencies, builds, then starts 8 real
# peers on this machine (gossamer launch: 8 `gossamer peer` processes over UCX) training the
# Fashion-MNIST MLP, with peer 0 four times slower than the others (examples/clusters/
# straggler8.json pads every step to 40 ms, peer 0's to 160 ms), and compares wait-free gossip
# with straggler-aware weights (async), synchronous gossip (dpsgd) and the all-reduce baseline:
# a printed table, out/demo/result.json and the plots out/demo/loss.png, accuracy.png, idle.png,
# the timelines out/demo/trace-<algorithm>.json (docs/formats/trace.md) and the page out/demo/report.html
# (gossamer report, docs/operations/report.md).
# The table's first column is the time to 85% test accuracy (the peers evaluate their own
# models every 2 s); the final accuracy is that of the exact average of all models at the end.
#
# Training time: 3 epochs per peer (iid shards of 7,500 samples: 351 steps of 64), so the slow
# peer needs 351 x 0.16 s = 56 s per algorithm, plus about 15 s to start 8 processes that each
# load Fashion-MNIST and to average the models: about 70 s per algorithm, 3.5 minutes for the
# three on a 2-core machine (the build before it not counted).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target gossamer  # the CLI alone: the tests are scripts/test.sh's
g=build/release/cli/gossamer
out=out/demo  # gossamer launch replaces its own earlier output there (docs/operations/cli.md)

echo
echo "== The topology: a ring of 8 peers (how fast it averages, what it sends) =="
"$g" topo show examples/topologies/ring8.json

echo
echo "== 8 real peers, Fashion-MNIST MLP, ring, peer 0 four times slower =="
echo "   (wall-clock time; the same hyperparameters and data order for every algorithm)"
start=$SECONDS
"$g" launch --topology examples/topologies/ring8.json \
  --cluster examples/clusters/straggler8.json --config examples/launch/fashion_mlp8.json \
  --algorithms async,dpsgd,allreduce --out "$out" --trace "$out/trace.json"
echo "training part: $((SECONDS - start)) s; plots: $out/loss.png, $out/accuracy.png, $out/idle.png"
echo "timelines (Perfetto / chrome://tracing): $out/trace-async.json, trace-dpsgd.json, trace-allreduce.json"

echo
echo "== The report page: table, plots, topology, bytes per edge, links to the timelines =="
"$g" report "$out"
echo "open $out/report.html in a browser (it loads nothing from the network)"
