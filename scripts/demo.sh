#!/usr/bin/env bash
# The main job, runnable on a fresh machine: installs dependencies, builds, then analyses the
# example topologies and a set of 64-peer families, prints the comparison and writes a plot of
# their averaging runs to out/consensus.png. (Real peers with a straggler replace this once the
# peer and launcher exist; see docs/roadmap.md.)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
g=build/release/cli/gossamer
out=out
rm -rf "$out/curves" "$out/topologies"
mkdir -p "$out/curves" "$out/topologies"

echo
echo "== The example topologies (examples/topologies) =="
"$g" topo show examples/topologies/*.json

echo
echo "== 64 peers: which graph averages fastest, and what it costs per round (model 4 MiB) =="
for spec in "ring" "torus" "hypercube" "exponential" "one_peer_exponential" \
            "random_matching --seed 1" "erdos_renyi --p 0.1 --seed 1" "complete"; do
  name="${spec%% *}"
  # shellcheck disable=SC2086
  "$g" topo gen --family $spec --n 64 > "$out/topologies/$name.json"
done
"$g" topo show "$out"/topologies/*.json --curve-dir "$out/curves" --json > "$out/topologies.json"
"$g" topo show "$out"/topologies/*.json
# Debian's interpreter, the one python3-matplotlib belongs to (not a python3 earlier on PATH).
/usr/bin/python3 scripts/plot_consensus.py "$out/curves" "$out/consensus.png"
echo "summary: $out/topologies.json; plot: $out/consensus.png"
