#!/usr/bin/env bash
# Streaming fragments (issue 41, docs/results/streaming.md): 16 peers, Fashion-MNIST MLP,
# one-peer exponential, DiLoCo's outer step (H = 8, Nesterov lr 0.7, momentum 0.9), dpsgd:
# the plain outer layer against k = 2 and 4 equal fragments (alpha 0, the default, and 0.5),
# on homogeneous16 (10 Gbit/s) and on 100 Mbit/s links, blocking and with "delay": 1. Prints
# per row the final accuracy, the time to 85% (virtual seconds), the idle share and the peak
# bytes a peer sends per protocol step (round or sub-round) against the plain layer's.
#   scripts/experiments/streaming.sh   (about 40 s of one core per row; 12 rows)
# RUNS="k0 k4" picks rows; GOSSAMER_BIN=path uses an already built binary.
set -euo pipefail
cd "$(dirname "$0")/../.."
g="${GOSSAMER_BIN:-}"
if [ -z "$g" ]; then
  cmake --preset release >/dev/null
  cmake --build --preset release --target gossamer -j 2 >/dev/null
  g=build/release/cli/gossamer
fi
root=out/experiments/streaming
mkdir -p "$root"
# Variants of the example files: one key changed each.
variant() {  # name source alpha delay
  /usr/bin/python3 - "$root/$1.json.in" "$2" "$3" "$4" <<'PY'
import json, sys
out, src, alpha, delay = sys.argv[1:]
c = json.load(open(src))
c["algorithms"] = {"dpsgd": {"mode": "atc", "delay": int(delay)}}
if alpha != "-":
    c["outer"]["alpha"] = float(alpha)
json.dump(c, open(out, "w"), indent=1)
PY
}
fast=examples/clusters/homogeneous16.json
slow=examples/clusters/homogeneous16_100mbit.json
declare -A cfg cluster
for k in 0 2 4; do
  src=examples/sim/fashion_mlp16_streaming$k.json
  [ "$k" = 0 ] && src=examples/sim/fashion_mlp16_outer.json
  variant "k$k" "$src" - 0
  cfg[k$k]="$root/k$k.json.in"; cluster[k$k]=$fast
  if [ "$k" != 0 ]; then
    variant "k${k}_a05" "$src" 0.5 0
    cfg[k${k}_a05]="$root/k${k}_a05.json.in"; cluster[k${k}_a05]=$fast
  fi
done
for k in 0 4; do
  cfg[slow_k$k]="${cfg[k$k]}"; cluster[slow_k$k]=$slow
  src="${cfg[k$k]}"
  variant "slow_d1_k$k" "$src" - 1
  cfg[slow_d1_k$k]="$root/slow_d1_k$k.json.in"; cluster[slow_d1_k$k]=$slow
done
cfg[slow_k4_a05]="${cfg[k4_a05]}"; cluster[slow_k4_a05]=$slow
variant slow_d1_k4_a05 "${cfg[k4_a05]}" 0.5 1
cfg[slow_d1_k4_a05]="$root/slow_d1_k4_a05.json.in"; cluster[slow_d1_k4_a05]=$slow
all="k0 k2 k4 k2_a05 k4_a05 slow_k0 slow_d1_k0 slow_k4 slow_d1_k4 slow_k4_a05 slow_d1_k4_a05"
for name in ${RUNS:-$all}; do
  echo "== $name: ${cfg[$name]} on ${cluster[$name]}"
  "$g" sim --topology examples/topologies/one-peer-exp16.json --cluster "${cluster[$name]}" \
    --config "${cfg[$name]}" --algorithms dpsgd --target 0.85 --out "$root/$name" \
    --save "$root/$name.json" >"$root/$name.txt"
done
/usr/bin/python3 - "$root" "${RUNS:-$all}" <<'PY'
import json, os, sys
root, names = sys.argv[1], sys.argv[2].split()
def peak(name):  # bytes per protocol step: each step sends one fragment (or the whole model)
    path = f"{root}/{name}/dpsgd/seed0/peers.jsonl"
    if not os.path.exists(path):
        return float("nan")
    return max(p["bytes_sent"] / p["rounds"] for p in map(json.loads, open(path)))
print(f"{'row':16} {'final acc':>9} {'to 85% [s]':>10} {'idle':>6} {'consensus':>9} "
      f"{'bytes/step':>11} {'ratio':>6}")
for n in names:
    a = json.load(open(f"{root}/{n}.json"))["algorithms"][0]
    ref = peak("slow_k0" if n.startswith("slow") else "k0")
    t = a["time_to_target"]
    print(f"{n:16} {100 * a['final_accuracy']:9.2f} {f"{t:.1f}" if t is not None else "-":>10} "
          f"{100 * a['idle_share']:5.1f}% {a['consensus']:9.3f} {peak(n):11.0f} "
          f"{peak(n) / ref:6.4f}")
PY
