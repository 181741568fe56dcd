#!/usr/bin/env bash
# MPI_Allreduce between the lab's hosts, over the veths the kernel shapes: the like-for-like
# reference of `gossamer launch --hosts netns --algorithms allreduce` (docs/results/benchmarks.md, "In the
# lab"). Builds a lab from a cluster file (`gossamer lab up`), starts one MPI rank in each peer's
# namespace, forces OpenMPI onto TCP over the lab's /24 (`--mca pml ob1 --mca btl tcp,self
# --mca btl_tcp_if_include 10.213.S.0/24`), and emulates the training loop of the lab's job:
# every iteration rank r sleeps its padded step (the cluster file's base_time x factor) and then
# all-reduces the gradient (--bytes, default the wide MLP's 23,298,088), as DDP and Gossamer's
# allreduce do, with no barrier between iterations. Prints one JSON line per variant (OpenMPI's
# own choice, and its ring forced) with the time per iteration, and the bytes each peer's uplink
# qdisc carried (proof that the traffic crossed the shaped veths).
#
#   scripts/lab/mpi_ring.sh [--cluster FILE] [--bytes B] [--iters I] [--warmup W]
#                           [--variants default,ring] [--json OUT]
#
# Needs root, iproute2, OpenMPI (`scripts/deps.sh --bench --lab`) and gossamer_mpi_allreduce
# (built with the MPI reference: GOSSAMER_BUILD_MPI_REF). GOSSAMER and GOSSAMER_MPI_ALLREDUCE name
# the binaries (default: build/ci's). Anything missing: one line, exit 2. Each mpirun is bounded
# by 600 s; the lab is removed however the script ends.
#
# How the ranks reach mpirun: OpenMPI's ranks talk to mpirun through PMIx over TCP, and the lab's
# namespaces cannot reach the machine's loopback. So mpirun itself runs in peer 0's namespace with
# PMIx listening on the lab's /24; each rank enters its own namespace (`ip netns exec`) before
# MPI_Init. Only the start-up's few kilobytes of PMIx cross the veths besides the all-reduce.
set -euo pipefail
cd "${0%/*}/../.."

cluster=examples/lab/uneven8.json
bytes=23298088
iters=16
warmup=1
variants=default,ring
json=""
die() { echo "scripts/lab/mpi_ring.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --cluster) cluster=${2:-}; shift 2 ;;
    --bytes) bytes=${2:-}; shift 2 ;;
    --iters) iters=${2:-}; shift 2 ;;
    --warmup) warmup=${2:-}; shift 2 ;;
    --variants) variants=${2:-}; shift 2 ;;
    --json) json=${2:-}; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1'; see --help" ;;
  esac
done
[[ "$bytes" =~ ^[0-9]+$ && "$bytes" -ge 4 ]] || die "--bytes '$bytes': use a whole number of bytes >= 4"
[[ "$iters" =~ ^[0-9]+$ && "$iters" -ge 1 ]] || die "--iters '$iters': use a whole number >= 1"
[[ "$warmup" =~ ^[0-9]+$ ]] || die "--warmup '$warmup': use a whole number >= 0"
for v in ${variants//,/ }; do
  case "$v" in default|ring) ;; *) die "--variants: '$v' is not default or ring" ;; esac
done
[ -f "$cluster" ] || die "--cluster $cluster: no such file"

missing=()
[ "$EUID" -eq 0 ] || missing+=("root")
for c in ip tc mpirun python3; do command -v "$c" >/dev/null 2>&1 || missing+=("$c"); done
[ ${#missing[@]} -eq 0 ] || die "needs root, iproute2 and OpenMPI; missing: ${missing[*]} (scripts/deps.sh --bench --lab)"
g=${GOSSAMER:-build/ci/cli/gossamer}
mpi=${GOSSAMER_MPI_ALLREDUCE:-build/ci/bench/gossamer_mpi_allreduce}
[ -x "$g" ] || die "GOSSAMER=$g is not an executable; build first (cmake --build --preset ci)"
[ -x "$mpi" ] || die "GOSSAMER_MPI_ALLREDUCE=$mpi is not an executable; build with OpenMPI installed"
mpi=$(readlink -f "$mpi")

# Per-rank padded step in ms, and n, from the cluster file (base_time x factor; jitter and slow
# periods are the peers' emulation and not applied here, as for ddp).
read -r n steps < <(python3 - "$cluster" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
n = c["n"]
d = c.get("defaults", {})
base = [d.get("base_time", 0.0)] * n
factor = [d.get("factor", 1.0)] * n
for p in c.get("peers", []):
    ranks = p.get("ranks", [p["rank"]] if "rank" in p else [])
    for r in ranks:
        if "base_time" in p: base[r] = p["base_time"]
        if "factor" in p: factor[r] = p["factor"]
print(n, ",".join("%.3f" % (1000 * b * f) for b, f in zip(base, factor)))
EOF
) || die "$cluster: cannot read n, base_time and factor (docs/formats/cluster-format.md)"

tmp=$(mktemp -d)
lab_pid=""
cleanup() {
  if [ -n "$lab_pid" ]; then kill "$lab_pid" 2>/dev/null || true; wait "$lab_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$g" lab up --cluster "$cluster" --for 1800 >"$tmp/lab.txt" 2>&1 &
lab_pid=$!
for _ in $(seq 1 300); do
  grep -q '^holding' "$tmp/lab.txt" 2>/dev/null && break
  kill -0 "$lab_pid" 2>/dev/null || { cat "$tmp/lab.txt" >&2; die "gossamer lab up failed (above)"; }
  sleep 0.1
done
grep -q '^holding' "$tmp/lab.txt" || die "gossamer lab up did not hold a lab within 30 s"
job=$(sed -n 's/^lab \(gsm[0-9]*\): .* in \([0-9./]*\) .*/\1/p' "$tmp/lab.txt" | head -1)
net=$(sed -n 's/^lab \(gsm[0-9]*\): .* in \([0-9./]*\) .*/\2/p' "$tmp/lab.txt" | head -1)
[ -n "$job" ] && [ -n "$net" ] || die "cannot read the lab's job and /24 from: $(head -1 "$tmp/lab.txt")"
echo "lab $job ($net): $n ranks, padded steps [ms] $steps, $bytes bytes, $iters iterations" >&2

cat >"$tmp/rank.sh" <<EOF
#!/bin/sh
exec ip netns exec $job-p\${OMPI_COMM_WORLD_RANK:?not started by mpirun} "\$@"
EOF
chmod +x "$tmp/rank.sh"

uplink_bytes() {  # bytes through each peer's uplink root qdisc, comma separated
  local out=() b
  for ((r = 0; r < n; r++)); do
    b=$(tc -s -n "$job-p$r" qdisc show dev "${job}p$r" | awk '/^qdisc htb 1: root/{f=1} f&&/Sent/{print $2; exit}')
    out+=("${b:-0}")
  done
  (IFS=,; echo "${out[*]}")
}

[ -z "$json" ] || : >"$json"
for v in ${variants//,/ }; do
  extra=()
  [ "$v" = ring ] && extra=(--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 4)
  before=$(uplink_bytes)
  line=$(timeout 600 ip netns exec "$job-p0" env PMIX_MCA_ptl_tcp_if_include="$net" \
      mpirun --allow-run-as-root --oversubscribe -np "$n" --mca pml ob1 --mca btl tcp,self \
      --mca btl_tcp_if_include "$net" --mca oob_tcp_if_include "$net" "${extra[@]}" \
      "$tmp/rank.sh" "$mpi" --sizes "$bytes" --iters "$iters" --warmup "$warmup" \
      --step-ms "$steps" 2>"$tmp/mpi.err" | grep '"mode": "train"') || {
    tail -5 "$tmp/mpi.err" >&2
    echo "scripts/lab/mpi_ring.sh: mpirun ($v) failed or passed 600 s (its last lines above)" >&2
    exit 1
  }
  after=$(uplink_bytes)
  sent=$(python3 -c "import sys; b=[int(x) for x in sys.argv[1].split(',')]; a=[int(x) for x in sys.argv[2].split(',')]; print(','.join(str(y-x) for x,y in zip(b,a)))" "$before" "$after")
  out="{\"variant\": \"$v\", \"cluster\": \"$cluster\", \"uplink_bytes\": [$sent], \"result\": $line}"
  echo "$out"
  [ -z "$json" ] || echo "$out" >>"$json"
done
