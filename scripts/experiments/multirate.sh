#!/usr/bin/env bash
# Experiment 4 (docs/algorithms/multirate.md): 16 peers, Fashion-MNIST MLP, one-peer exponential,
# homogeneous cluster, 3 seeds: dpsgd against dpsgd with multirate partitions (fast = fc3,
# slow = fc1 + fc2 with period 4), with and without an fp16 compressor for the slow partition,
# plus ablations (slow gossip alone, with and without fp16; k = 2). Prints bytes and backward
# compute per peer until 85% test accuracy, and the final accuracy.
#   scripts/experiments/multirate.sh [--seeds K]   (1-3 minutes per run and seed on 2 cores)
# RUNS="dpsgd multirate" picks variants (default: all six); GOSSAMER_BIN=path uses an already
# built binary instead of building the release preset.
set -euo pipefail
cd "$(dirname "$0")/../.."
seeds=3
[ "${1:-}" = "--seeds" ] && seeds="$2"
g="${GOSSAMER_BIN:-}"
if [ -z "$g" ]; then
  cmake --preset release >/dev/null
  cmake --build --preset release --target gossamer -j 2 >/dev/null
  g=build/release/cli/gossamer
fi
root=out/experiments/multirate
mkdir -p "$root"
declare -A config=(
  [dpsgd]=examples/sim/fashion_mlp16.json
  [multirate]=examples/sim/fashion_mlp16_multirate.json
  [slow_gossip]=examples/sim/fashion_mlp16_slow_gossip.json
  [multirate_k2]=examples/sim/fashion_mlp16_multirate_k2.json
  [multirate_fp16]=examples/sim/fashion_mlp16_multirate_fp16.json
  [slow_gossip_fp16]=examples/sim/fashion_mlp16_slow_gossip_fp16.json
)
all="dpsgd multirate multirate_fp16 slow_gossip slow_gossip_fp16 multirate_k2"
for name in ${RUNS:-$all}; do
  echo "== $name (${config[$name]}): 16 peers, one-peer exponential, homogeneous16, $seeds seeds =="
  "$g" sim --topology examples/topologies/one-peer-exp16.json \
    --cluster examples/clusters/homogeneous16.json --config "${config[$name]}" --algorithms dpsgd \
    --seeds "$seeds" --target 0.85 --out "$root/$name" --save "$root/$name.json" | tee "$root/$name.txt"
done
/usr/bin/python3 - "$root" "$all" <<'PY'
import json, os, sys
root = sys.argv[1]
names = [n for n in sys.argv[2].split() if os.path.exists(f"{root}/{n}.json")]
rows = {n: json.load(open(f"{root}/{n}.json"))["algorithms"][0] for n in names}
def fmt(v, spread=None, scale=1, digits=1):
    if v is None:
        return "not reached"
    return f"{v * scale:.{digits}f}" + (f" ±{spread * scale:.{digits}f}" if spread else "")
print(f"\n{'run':<17} {'MB/peer to 85%':>16} {'bwd GMAC/peer to 85%':>21} {'time to 85% [s]':>16} "
      f"{'final acc [%]':>14} {'MB/peer total':>14} {'GMAC/peer total':>16}")
for n, r in rows.items():
    print(f"{n:<17} {fmt(r['mb_to_target_per_peer'], r['mb_to_target_spread']):>16} "
          f"{fmt(r['backward_gmac_to_target_per_peer'], r['backward_gmac_to_target_spread'], digits=2):>21} "
          f"{fmt(r['time_to_target'], r['time_to_target_spread']):>16} "
          f"{fmt(r['final_accuracy'], r['final_accuracy_spread'], 100, 2):>14} "
          f"{r['mb_sent_per_peer']:>14.1f} {r['backward_gmac_per_peer']:>16.2f}")
d = rows.get("dpsgd")
for n, m in rows.items():
    if n == "dpsgd" or not d or not d["mb_to_target_per_peer"] or not m["mb_to_target_per_peer"]:
        continue
    def change(key):
        c = 100 * (m[key] / d[key] - 1)
        return f"{abs(c):.1f}% {'less' if c < 0 else 'more'}"
    print(f"{n}: to 85%, {change('mb_to_target_per_peer')} bytes and "
          f"{change('backward_gmac_to_target_per_peer')} backward compute than dpsgd; "
          f"final accuracy {100 * (m['final_accuracy'] - d['final_accuracy']):+.2f} points")
PY
# One folder with every variant side by side for scripts/plot.py.
mkdir -p "$root/all"
for name in $all; do
  [ -d "$root/$name/dpsgd" ] && ln -sfn "../$name/dpsgd" "$root/all/$name"
done
for x in time bytes backward; do /usr/bin/python3 scripts/plot.py "$root/all" --target 0.85 --x "$x"; done
