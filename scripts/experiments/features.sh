#!/usr/bin/env bash
# The four experiments of docs/results/experiments.md (issue 5): straggler-aware async gossip against
# all-reduce (one straggler; jittery peers), CHOCO with top-k 1% against D-PSGD, and multirate
# partitions against D-PSGD. 16 simulated peers, Fashion-MNIST MLP, one-peer exponential graph.
#   scripts/experiments/features.sh [--seeds K] [--only 1,2,3,4]
# Release build; writes out/experiments/<name>/ (metrics, plots, summary.json), copies the plots
# to docs/figures/experiment-*.png, and prints each experiment's table and whether its targets
# were met. About 30 minutes on 2 idle cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
seeds=3
only="1,2,3,4"
while [ $# -gt 0 ]; do
  case "$1" in
    --seeds) seeds="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "features.sh: unknown option '$1'; use --seeds K or --only 1,2,3,4" >&2; exit 2 ;;
  esac
done
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" >/dev/null
g=build/release/cli/gossamer
cmp=scripts/experiments/compare.py
base=examples/sim/fashion_mlp16.json
out=out/experiments
mkdir -p "$out"

# run NAME CLUSTER CONFIG ALGORITHMS: one gossamer sim over the seeds, its table and plots.
run() {
  echo "== $1: cluster $2, $3, $4, $seeds seeds =="
  "$g" sim --topology examples/topologies/one-peer-exp16.json \
    --cluster "examples/clusters/$2.json" --config "$3" --algorithms "$4" --seeds "$seeds" \
    --out "$out/$1" --save "$out/$1/summary.json" | tee "$out/$1.txt"
  /usr/bin/python3 scripts/plot.py "$out/$1" --target 0.85 >/dev/null
  cp "$out/$1/accuracy.png" "docs/figures/experiment-$1-accuracy.png"
}
want() { [[ ",$only," == *",$1,"* ]]; }
s() { echo "$out/$1/summary.json:$2"; }

if want 1; then
  run straggler straggler16 "$base" allreduce,async
  $cmp "1 straggler" time "$(s straggler allreduce)" "$(s straggler async)" --min 3 --acc-within 0.5
fi
if want 2; then
  run jitter jitter16 "$base" allreduce,async
  $cmp "2 jitter" time "$(s jitter allreduce)" "$(s jitter async)" --min 1.5
fi
if want 3 || want 4; then
  run homogeneous homogeneous16 "$base" dpsgd,choco
fi
if want 3; then
  /usr/bin/python3 scripts/plot.py "$out/homogeneous" --target 0.85 --x bytes >/dev/null
  cp "$out/homogeneous/accuracy-bytes.png" docs/figures/experiment-homogeneous-accuracy-bytes.png
  $cmp "3 choco top-k 1%" bytes "$(s homogeneous dpsgd)" "$(s homogeneous choco)" --min 10 \
    --acc-within 1
fi
if want 4; then
  # The multirate run of scripts/experiments/multirate.sh (its other variants: docs/algorithms/multirate.md).
  GOSSAMER_BIN="$g" RUNS=multirate scripts/experiments/multirate.sh --seeds "$seeds"
  mr="$out/multirate/multirate.json:dpsgd"
  $cmp "4 multirate" bytes "$(s homogeneous dpsgd)" "$mr" --min 2 --acc-within 0.5
  $cmp "4 multirate" backward "$(s homogeneous dpsgd)" "$mr"
fi
