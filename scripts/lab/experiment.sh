#!/usr/bin/env bash
# Issue 22's experiment (docs/operations/lab.md, "The experiment: gossip against DDP and all-reduce"): on the
# lab's uneven cluster (examples/lab/uneven8.json) and on a homogeneous lab of the same size
# (examples/lab/homogeneous8.json), 8 `gossamer peer` processes (torch for ddp), each a host of a
# network-namespace lab, train examples/lab/experiment8.json on a ring with ddp, allreduce, dpsgd,
# sgp, async, choco and the best multirate variant (slow_gossip, experiment8_slow_gossip.json);
# `gossamer sim` of the same cluster file, topology and config runs beside each. Writes
# OUT/table.md (time to the target, final accuracy, time per iteration, MB sent per peer, idle
# share; real and sim side by side, mean +- half the range over the seeds), OUT/table.json and
# the plots OUT/<cluster>-accuracy-time.svg and OUT/<cluster>-accuracy-bytes.svg.
#
#   scripts/lab/experiment.sh [--seeds N] [--out DIR] [--algorithms LIST] [--eval-interval S]
#                             [--eval-samples N] [--timeout S] [--clusters LIST] [--part P]
#                             [--quick]
#
# --clusters LIST: uneven8, homogeneous8 or both (default), to run one cluster at a time.
# --part real|sim|both (default both): only the lab runs (timing-sensitive: keep the machine
# otherwise idle), or only the simulations (deterministic: they may share the machine). Runs
# already in OUT are skipped, so a later call adds what is missing.
# --seeds N: runs per cluster and algorithm, seeds 1..N (default 3). --quick: a smoke run of a
# minute or two (a tiny MLP on 2,048 images, one seed; allreduce and async unless --algorithms). Time of the full
# run: hours on a 2-core machine (docs/operations/lab.md); run one seed first. Needs root and iproute2
# (`scripts/deps.sh --lab`), and python3-torch for ddp. GOSSAMER=path/to/gossamer picks the
# binary (default: build the release preset).
set -euo pipefail
cd "${0%/*}/../.."

die() {
  echo "scripts/lab/experiment.sh: $*" >&2
  exit 2
}

seeds=3 quick=0 chosen=0 out=out/lab-experiment interval=5 samples=500 timeout=3600
algos=ddp,allreduce,dpsgd,sgp,async,choco,multirate clusters=uneven8,homogeneous8 part=both
known=" ddp allreduce dpsgd sgp async choco multirate "
while [ $# -gt 0 ]; do
  case "$1" in
    --seeds) [ $# -ge 2 ] || die "--seeds needs a count"; seeds=$2; shift 2 ;;
    --out) [ $# -ge 2 ] || die "--out needs a folder"; out=$2; shift 2 ;;
    --algorithms) [ $# -ge 2 ] || die "--algorithms needs a list"; algos=$2; chosen=1; shift 2 ;;
    --eval-interval) [ $# -ge 2 ] || die "--eval-interval needs seconds"; interval=$2; shift 2 ;;
    --eval-samples) [ $# -ge 2 ] || die "--eval-samples needs a count"; samples=$2; shift 2 ;;
    --timeout) [ $# -ge 2 ] || die "--timeout needs seconds"; timeout=$2; shift 2 ;;
    --clusters) [ $# -ge 2 ] || die "--clusters needs a list"; clusters=$2; shift 2 ;;
    --part) [ $# -ge 2 ] || die "--part needs real, sim or both"; part=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument \"$1\"; see --help" ;;
  esac
done
if ! [[ "$seeds" =~ ^[0-9]+$ ]] || [ "$seeds" -lt 1 ] || [ "$seeds" -gt 20 ]; then
  die "--seeds $seeds: use a whole number from 1 to 20"
fi
if ! [[ "$samples" =~ ^[0-9]+$ ]] || [ "$samples" -lt 1 ]; then
  die "--eval-samples $samples: use a whole number >= 1"
fi
if ! [[ "$interval" =~ ^[0-9]*\.?[0-9]+$ ]] || [[ "$interval" =~ ^0*\.?0*$ ]]; then
  die "--eval-interval $interval: use seconds > 0, e.g. 5"
fi
if ! [[ "$timeout" =~ ^[0-9]+$ ]] || [ "$timeout" -lt 1 ]; then
  die "--timeout $timeout: use whole seconds >= 1"
fi
[[ "$part" == real || "$part" == sim || "$part" == both ]] ||
  die "--part $part: use real (the lab runs), sim (the simulations) or both"
IFS=, read -ra cluster_list <<<"$clusters"
[ ${#cluster_list[@]} -gt 0 ] || die "--clusters is empty; name uneven8, homogeneous8 or both"
for c in "${cluster_list[@]}"; do
  [[ "$c" == uneven8 || "$c" == homogeneous8 ]] ||
    die "--clusters: unknown cluster \"$c\"; use uneven8, homogeneous8 or both (comma-separated)"
done
IFS=, read -ra list <<<"$algos"
[ ${#list[@]} -gt 0 ] || die "--algorithms is empty; name some of:$known"
for a in "${list[@]}"; do
  [[ "$known" == *" $a "* ]] || die "--algorithms: unknown algorithm \"$a\"; use some of:$known"
done

missing=()
[ "$EUID" -eq 0 ] || missing+=("root")
command -v ip >/dev/null 2>&1 || missing+=("ip")
command -v tc >/dev/null 2>&1 || missing+=("tc")
[ -x /usr/bin/python3 ] || missing+=("/usr/bin/python3")
if [ ${#missing[@]} -gt 0 ]; then
  die "the lab needs root, iproute2 (ip, tc) and python3; missing: ${missing[*]}; run it as root after scripts/deps.sh --lab"
fi

if [ "$quick" = 1 ]; then
  seeds=1 interval=0.5 samples=500 timeout=180
  [ "$chosen" = 1 ] || list=(allreduce async)
fi
if [[ " ${list[*]} " == *" ddp "* ]] && ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  die "ddp needs python3-torch (scripts/deps.sh --bench installs it); or leave it out: --algorithms ${algos/ddp,/}"
fi

if [ -n "${GOSSAMER:-}" ]; then
  g=$GOSSAMER
  [ -x "$g" ] || die "GOSSAMER=$g is not an executable; unset it to build build/release's gossamer"
else
  echo "== building gossamer (release preset) =="
  cmake --preset release >/dev/null
  cmake --build --preset release -j "$(nproc)" --target gossamer
  g=build/release/cli/gossamer
fi
# shellcheck source=../blas_env.sh
. scripts/blas_env.sh # one BLAS thread per peer, OpenBLAS kernels for this CPU

topology=examples/lab/ring8.json
config=examples/lab/experiment8.json
config_mr=examples/lab/experiment8_slow_gossip.json
mkdir -p "$out"
if [ "$quick" = 1 ]; then
  # A tiny job: the whole run is about how the script works, not about the figures.
  /usr/bin/python3 - "$out/quick.json" "$out/quick_multirate.json" <<'EOF'
import json, sys
job = {"description": "scripts/lab/experiment.sh --quick: a smoke run", "seed": 1,
       "data": {"name": "fashion-mnist", "train_limit": 2048},
       "model": {"name": "mlp", "hidden": [64]},
       "optimizer": {"name": "sgd", "lr": 0.1, "momentum": 0.9, "nesterov": True},
       "training": {"epochs": 2, "batch_size": 64, "target_accuracy": 0.5},
       "sharding": {"mode": "iid"},
       "algorithms": {"dpsgd": {"mode": "atc"}, "async": {"straggler_aware": True},
                      "choco": {"gamma": 0.2, "compressor": {"name": "topk", "fraction": 0.1}}}}
json.dump(job, open(sys.argv[1], "w"))
job.update({"partitions": {"fast": ["fc2"], "slow": ["*"]},
            "multirate": {"partitions": {"slow": {"period": 1, "gossip_period": 4}}},
            "algorithms": {"dpsgd": {"mode": "atc"}}})
json.dump(job, open(sys.argv[2], "w"))
EOF
  config=$out/quick.json config_mr=$out/quick_multirate.json
fi

with_seed() { # with_seed CONFIG SEED OUT: the config with its seed set
  /usr/bin/python3 -c 'import json, sys
c = json.load(open(sys.argv[1])); c["seed"] = int(sys.argv[2]); json.dump(c, open(sys.argv[3], "w"), indent=1)' "$1" "$2" "$3"
}
join() { local IFS=,; echo "$*"; }

# One launch and one sim per algorithm, each into its own folder: a run that is already there
# (its result.json, its sim summary) is not run again, so a long experiment can be resumed or
# extended one algorithm at a time; delete a folder to run it again.
failed=0
for name in "${cluster_list[@]}"; do
  cluster=examples/lab/$name.json
  if [ "$quick" = 0 ] && [ "$part" != sim ] && [ ! -s "$out/$name-lab-check.txt" ]; then
    echo "== $name: can this machine carry its rates? (gossamer lab check, 3 s) =="
    "$g" lab check --cluster "$cluster" --seconds 3 | tee "$out/$name-lab-check.txt"
  fi
  for seed in $(seq 1 "$seeds"); do
    dir=$out/$name/seed$seed
    mkdir -p "$dir"
    with_seed "$config" "$seed" "$dir/config.json"
    with_seed "$config_mr" "$seed" "$dir/config_multirate.json"
    common=(--topology "$topology" --cluster "$cluster" --eval-interval "$interval")
    for a in "${list[@]}"; do
      # multirate: dpsgd with the slow_gossip config; ddp: torch, its sim is allreduce's.
      run=$a sim=$a cfg=$dir/config.json
      [ "$a" = multirate ] && run=dpsgd sim=dpsgd cfg=$dir/config_multirate.json
      [ "$a" = ddp ] && sim=allreduce
      real_dir=$dir/real-$a
      sim_name=$([ "$a" = multirate ] && echo multirate || echo "$sim")
      if [ "$part" = sim ]; then
        :
      elif [ -s "$real_dir/result.json" ]; then
        echo "== $name, seed $seed, $a: real run already in $real_dir (delete it to rerun) =="
      else
        echo "== $name, seed $seed, $a: real peers in the lab =="
        rm -rf "$real_dir"
        "$g" launch --hosts netns "${common[@]}" --config "$cfg" --algorithms "$run" \
          --eval-samples "$samples" --timeout "$timeout" --no-plots --out "$real_dir" ||
          { echo "warning: $name seed $seed: the real $a run failed (its row shows what is missing)" >&2; failed=1; }
      fi
      if [ "$part" = real ]; then
        :
      elif [ -s "$dir/sim-$sim_name.json" ]; then
        echo "== $name, seed $seed, $a: its sim already in $dir/sim-$sim_name.json =="
      else
        echo "== $name, seed $seed, $a: gossamer sim of the same files ($sim) =="
        rm -rf "$dir/sim-$sim_name"
        "$g" sim "${common[@]}" --config "$cfg" --algorithms "$sim" --peer-eval-samples "$samples" \
          --average-eval-samples "$samples" --json --save "$dir/sim-$sim_name.json.part" \
          --out "$dir/sim-$sim_name" >/dev/null &&
          mv "$dir/sim-$sim_name.json.part" "$dir/sim-$sim_name.json" ||
          { echo "warning: $name seed $seed: the sim of $a failed" >&2; failed=1; }
      fi
    done
  done
done

/usr/bin/python3 scripts/lab/experiment_table.py "$out" --seeds "$seeds" \
  --algorithms "$(join "${list[@]}")" | tee "$out/table.md"
echo "table: $out/table.md, $out/table.json; plots: $out/*-accuracy-time.svg, $out/*-accuracy-bytes.svg"
exit "$failed"
