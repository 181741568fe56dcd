#!/usr/bin/env bash
# Issue 40's lab rows (docs/results/lab.md, "Local updates and outer optimizers (issue 40)"): on
# the lab's uneven cluster (examples/lab/uneven8.json, ring examples/lab/ring8.json) each ROW,
# LABEL=ALGORITHM=CONFIG (a training config with its "outer" section, e.g. the experiment's job
# with the tuned setting; LABEL names the row, e.g. diloco16=allreduce=FILE), runs as 8 real peers in a network-namespace lab (`gossamer launch --hosts
# netns`), then as `gossamer sim` of the same files with the step times that lab run measured
# (scripts/lab/measured_cluster.py: where 8 peers on 2 cores do not keep up with the pads), in
# the layout of scripts/lab/experiment.sh, so scripts/lab/experiment_table.py prints lab / sim
# side by side:
#
#   scripts/lab/outer_lab.sh --out DIR [--part real|sim|both] [--eval-interval S]
#                            [--eval-samples N] [--timeout S] LABEL=ALGORITHM=CONFIG...
#
# OUT/uneven8/seed1/real-LABEL/ (the launch, ALGORITHM/ inside), config_LABEL.json,
# cluster-LABEL.json (the measured cluster file), sim-LABEL.json and sim-LABEL/ (the sim),
# OUT/table.md (scripts/lab/experiment_table.py's labelled rows). A part already there is
# skipped (delete it to rerun). --part real: only the lab runs (keep the machine otherwise idle);
# --part sim: only the sims of lab runs already there. The row diloco=diloco=CONFIG is the torch
# reference (bench/diloco_ref.py; the gossamer package must be on PYTHONPATH or beside the
# binary); its sim is our allreduce under the same config and the torch run's step times.
# Defaults: evaluations every 1 s on 2,000 samples, timeout 900 s. Needs root and iproute2 (scripts/deps.sh --lab); GOSSAMER=path picks the
# binary (default build/ci/cli/gossamer). Bad flags: one line, exit 2.
set -euo pipefail
cd "${0%/*}/../.."

die() {
  echo "scripts/lab/outer_lab.sh: $*" >&2
  exit 2
}

out="" part=both interval=1 samples=2000 timeout=900 rows=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) [ $# -ge 2 ] || die "--out needs a folder"; out=$2; shift 2 ;;
    --part) [ $# -ge 2 ] || die "--part needs real, sim or both"; part=$2; shift 2 ;;
    --eval-interval) [ $# -ge 2 ] || die "--eval-interval needs seconds"; interval=$2; shift 2 ;;
    --eval-samples) [ $# -ge 2 ] || die "--eval-samples needs a count"; samples=$2; shift 2 ;;
    --timeout) [ $# -ge 2 ] || die "--timeout needs seconds"; timeout=$2; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown flag \"$1\"; see --help" ;;
    *=*=*) rows+=("$1"); shift ;;
    *) die "\"$1\" is not LABEL=ALGORITHM=CONFIG; see --help" ;;
  esac
done
[ -n "$out" ] || die "--out is required (a folder for the runs)"
[ ${#rows[@]} -gt 0 ] || die "no rows: give LABEL=ALGORITHM=CONFIG, e.g. diloco16=allreduce=diloco16.json"
[[ "$part" == real || "$part" == sim || "$part" == both ]] || die "--part $part: use real, sim or both"
[[ "$samples" =~ ^[0-9]+$ && "$samples" -ge 1 ]] || die "--eval-samples $samples: a whole number >= 1"
[[ "$timeout" =~ ^[0-9]+$ && "$timeout" -ge 1 ]] || die "--timeout $timeout: whole seconds >= 1"
for r in "${rows[@]}"; do
  [ -f "${r#*=*=}" ] || die "row $r: no config file ${r#*=*=}"
done
g=${GOSSAMER:-build/ci/cli/gossamer}
[ -x "$g" ] || die "GOSSAMER=$g is not an executable; build the gossamer target or set GOSSAMER"
if [ "$part" != sim ]; then
  [ "$EUID" -eq 0 ] || die "the lab runs need root (and iproute2: scripts/deps.sh --lab)"
fi
# shellcheck source=../blas_env.sh
. scripts/blas_env.sh

cluster=examples/lab/uneven8.json topology=examples/lab/ring8.json
dir=$out/uneven8/seed1
mkdir -p "$dir"
specs=()
for r in "${rows[@]}"; do
  label=${r%%=*} rest=${r#*=}
  a=${rest%%=*} cfg=${rest#*=}
  sim_algo=$a
  [ "$a" = diloco ] && sim_algo=allreduce
  if [ "$label" = diloco ]; then specs+=(diloco); else specs+=("$label=$a"); fi
  cp "$cfg" "$dir/config_$label.json"
  [ -s "$dir/config.json" ] || cp "$cfg" "$dir/config.json" # experiment_table.py reads the target here
  if [ "$part" != sim ]; then
    if [ -s "$dir/real-$label/result.json" ]; then
      echo "== $label: lab run already in $dir/real-$label =="
    else
      echo "== $label ($a): 8 real peers in the lab ($(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg)) =="
      rm -rf "$dir/real-$label"
      "$g" launch --hosts netns --topology "$topology" --cluster "$cluster" --config "$cfg" \
        --algorithms "$a" --eval-interval "$interval" --eval-samples "$samples" \
        --timeout "$timeout" --no-plots --out "$dir/real-$label" ||
        echo "warning: the lab run of $label failed" >&2
      echo "== $label: done ($(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg)) =="
    fi
  fi
  if [ "$part" != real ]; then
    if [ -s "$dir/sim-$label.json" ]; then
      echo "== $label: sim already in $dir/sim-$label.json =="
    elif [ ! -d "$dir/real-$label/$a" ]; then
      echo "warning: no lab run of $label to take the step times from; its sim is skipped" >&2
    else
      /usr/bin/python3 scripts/lab/measured_cluster.py "$dir/real-$label/$a" "$cluster" \
        "$dir/cluster-$label.json" --inner "$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("outer", {}).get("steps", 1))' "$cfg")"
      echo "== $label: gossamer sim ($sim_algo) with the measured step times =="
      rm -rf "$dir/sim-$label"
      "$g" sim --topology "$topology" --cluster "$dir/cluster-$label.json" --config "$cfg" \
        --algorithms "$sim_algo" --eval-interval "$interval" --peer-eval-samples "$samples" \
        --average-eval-samples 500 --json --save "$dir/sim-$label.json.part" --out "$dir/sim-$label" \
        >/dev/null && mv "$dir/sim-$label.json.part" "$dir/sim-$label.json" ||
        echo "warning: the sim of $label failed" >&2
    fi
  fi
done
list=$(IFS=,; echo "${specs[*]}")
/usr/bin/python3 scripts/lab/experiment_table.py "$out" --seeds 1 --algorithms "$list" | tee "$out/table.md"
