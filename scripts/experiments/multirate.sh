#!/usr/bin/env bash
# Experiment 4 (docs/multirate.md): 16 peers, Fashion-MNIST MLP, one-peer exponential, 3 seeds:
# dpsgd against dpsgd with multirate partitions (fast = fc3, slow = fc1 + fc2 with period 4).
# Prints bytes and backward compute per peer until 85% test accuracy, and the final accuracy.
#   scripts/experiments/multirate.sh [--seeds K]    (about 1-3 minutes per run on 2 cores)
# GOSSAMER_BIN=path uses an already built binary instead of building the release preset.
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
run() {  # name config
  echo "== $1: 16 peers, one-peer exponential, homogeneous cluster, $seeds seeds =="
  "$g" sim --topology examples/topologies/one-peer-exp16.json \
    --cluster examples/clusters/homogeneous16.json --config "$2" --algorithms dpsgd \
    --seeds "$seeds" --target 0.85 --out "$root/$1" --save "$root/$1.json" | tee "$root/$1.txt"
}
run dpsgd examples/sim/fashion_mlp16.json
run multirate examples/sim/fashion_mlp16_multirate.json
/usr/bin/python3 - "$root" <<'PY'
import json, sys
root = sys.argv[1]
rows = {name: json.load(open(f"{root}/{name}.json"))["algorithms"][0] for name in ("dpsgd", "multirate")}
def fmt(v, spread=None, scale=1, digits=1):
    if v is None:
        return "not reached"
    s = f"{v * scale:.{digits}f}"
    return s + (f" ±{spread * scale:.{digits}f}" if spread else "")
print(f"{'run':<10} {'MB/peer to 85%':>18} {'bwd GMAC/peer to 85%':>22} {'time to 85% [s]':>17} {'final acc [%]':>15}")
for name, r in rows.items():
    print(f"{name:<10} {fmt(r['mb_to_target_per_peer'], r['mb_to_target_spread']):>18} "
          f"{fmt(r['backward_gmac_to_target_per_peer'], r['backward_gmac_to_target_spread']):>22} "
          f"{fmt(r['time_to_target'], r['time_to_target_spread']):>17} "
          f"{fmt(r['final_accuracy'], r['final_accuracy_spread'], 100, 2):>15}")
d, m = rows["dpsgd"], rows["multirate"]
if d["mb_to_target_per_peer"] and m["mb_to_target_per_peer"]:
    print(f"bytes to 85%: {100 * (1 - m['mb_to_target_per_peer'] / d['mb_to_target_per_peer']):.1f}% fewer; "
          f"backward compute to 85%: {100 * (1 - m['backward_gmac_to_target_per_peer'] / d['backward_gmac_to_target_per_peer']):.1f}% less; "
          f"final accuracy {100 * (m['final_accuracy'] - d['final_accuracy']):+.2f} points")
PY
mkdir -p "$root/both"
ln -sfn ../dpsgd/dpsgd "$root/both/dpsgd"
ln -sfn ../multirate/dpsgd "$root/both/dpsgd+multirate"
/usr/bin/python3 scripts/plot.py "$root/both" --target 0.85 || true
