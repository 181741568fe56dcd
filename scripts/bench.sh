#!/usr/bin/env bash
# Runs the benchmarks, each beside a reference measured in the same run, and writes their JSON
# into out/bench/. Needs the reference programs: scripts/deps.sh --bench.
# `bench mix` needs 9 buffers of max(128 MiB, 4x the last-level cache) and about a minute.
# `bench transport` runs beside ucx_perftest twice: with UCX error handling (TCP on one host)
# and without (shared memory); UCX_TLS, when set, applies to both sides.
# `bench allreduce` (2, 4 and 8 processes, 1..64 MiB, beside mpirun) takes about 7 minutes on 2
# cores; `bench calibrate` writes out/bench/cluster.json for `gossamer sim --cluster`.
# bench/sim_scaling.py (the simulator's scaling exponents, 1,024..8,192 peers) takes about 8.
# Last, scripts/bench_compare.py prints every ratio and scale figure that moved more than its
# noise band since bench/recorded.json (exit 1 when one did; --record after an intended change).
#   scripts/bench.sh [--seconds S]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=3
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "scripts/bench.sh: unknown option '$1'; use --seconds S" >&2; exit 2 ;;
  esac
done
scripts/deps.sh --bench
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
# shellcheck source=scripts/blas_env.sh
. scripts/blas_env.sh
g=build/release/cli/gossamer
mkdir -p out/bench
echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(OpenBLAS default)}"
"$g" bench compute --seconds "$seconds" --save out/bench/compute.json
"$g" bench mix --save out/bench/mix.json
"$g" bench transport --save out/bench/transport.json
"$g" bench transport --errors none --save out/bench/transport-no-peer-errors.json
"$g" bench allreduce --procs 2,4,8 --sizes 1,4,16,64 --iters 10 --warmup 2 --repeats 2 \
  --json out/bench/allreduce.json
"$g" bench calibrate --config examples/train/fashion_mlp.json --out out/bench/cluster.json \
  --json > out/bench/calibrate.json
cat out/bench/calibrate.json
/usr/bin/python3 bench/sim_scaling.py --gossamer "$g" --sizes 1024,2048,4096,8192 --repeats 2 \
  --json out/bench/sim_scaling.json
# What moved since the recorded figures, so that a slower simulator, transport or mixing kernel
# shows in the change that made it (docs/results/benchmarks.md, "Comparing with the recorded
# figures").
/usr/bin/python3 scripts/bench_compare.py --out-dir out/bench --recorded bench/recorded.json
