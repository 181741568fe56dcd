#!/usr/bin/env bash
# The lab's demo (docs/operations/lab.md, "The communication-bound job"): 8 `gossamer peer` processes, each
# a host of a network-namespace lab, train the Fashion-MNIST MLP widened to [2048, 2048]
# (5.8 M parameters, 23.3 MB per model in fp32) on a ring, over links the kernel shapes from
# examples/lab/uneven8.json: 1 Gbit/s up and down for most peers, 100 Mbit/s for ranks 2 and 5,
# rank 7 computing 3x slower. It compares the all-reduce baseline, synchronous gossip (dpsgd) and
# wait-free gossip (async): a printed table, out/lab-demo/result.json and the plots
# out/lab-demo/loss.png, accuracy.png, idle.png.
#
# Needs root and iproute2 (`scripts/deps.sh --lab`); without them it says so in one line and
# exits 2. Time: one epoch over 8,192 images (16 steps of 64 per peer), every algorithm bounded
# by --timeout 300 s; on a 2-core machine the whole demo took about 6 minutes (docs/operations/lab.md).
#
#   scripts/lab/demo.sh               builds build/release's gossamer, then runs
#   GOSSAMER=path/to/gossamer scripts/lab/demo.sh    runs with that binary (no build)
set -euo pipefail
cd "${0%/*}/../.."  # no external command before the check below (it may run without PATH)

missing=()
[ "$EUID" -eq 0 ] || missing+=("root")
command -v ip >/dev/null 2>&1 || missing+=("ip")
command -v tc >/dev/null 2>&1 || missing+=("tc")
if [ ${#missing[@]} -gt 0 ]; then
  echo "scripts/lab/demo.sh: the lab needs root and iproute2 (ip, tc); missing: ${missing[*]}; run it as root after scripts/deps.sh --lab" >&2
  exit 2
fi

if [ -n "${GOSSAMER:-}" ]; then
  g=$GOSSAMER
  if [ ! -x "$g" ]; then
    echo "scripts/lab/demo.sh: GOSSAMER=$g is not an executable; unset it to build build/release's gossamer" >&2
    exit 2
  fi
else
  echo "== building gossamer (release preset) =="
  cmake --preset release >/dev/null
  cmake --build --preset release -j "$(nproc)" --target gossamer
  g=build/release/cli/gossamer
fi
# shellcheck source=../blas_env.sh
. scripts/blas_env.sh  # one BLAS thread per peer, OpenBLAS kernels for this CPU
out=out/lab-demo       # gossamer launch replaces its own earlier output there (docs/operations/cli.md)
cluster=examples/lab/uneven8.json
topology=examples/lab/ring8.json
config=examples/lab/fashion_wide8.json

echo
echo "== [1/3] the topology: a ring of 8 peers =="
"$g" topo show "$topology"

echo
echo "== [2/3] can this machine carry the cluster's rates? (gossamer lab check, 3 s) =="
"$g" lab check --cluster "$cluster" --seconds 3

echo
echo "== [3/3] 8 peers as lab hosts: wide MLP (23.3 MB per model), ranks 2 and 5 at 100 Mbit/s, rank 7 3x slower =="
echo "   (wall-clock time; allreduce, then dpsgd, then async; each bounded by 300 s)"
start=$SECONDS
"$g" launch --hosts netns --topology "$topology" --cluster "$cluster" --config "$config" \
  --algorithms allreduce,dpsgd,async --eval-interval 5 --eval-samples 500 --timeout 300 \
  --out "$out"
echo "training part: $((SECONDS - start)) s; results: $out/result.json; plots: $out/loss.png, $out/accuracy.png, $out/idle.png"
