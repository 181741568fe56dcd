#!/usr/bin/env bash
# The chaos run (docs/operations/reliability.md, "Chaos run"): jobs of real peers in the network-namespace
# lab under async, dpsgd and allreduce while a seeded schedule kills (SIGKILL), pauses
# (SIGSTOP/SIGCONT), cuts (ip link set down/up) and throttles (tc) them; the invariants are
# checked after every job, one line each, and the run exits 1 if any is broken.
#
#   scripts/chaos.sh --seed S --minutes M [--peers N] [--job-seconds T] [--algorithms A,B]
#                    [--out DIR]          (default out/chaos: chaos.log, chaos.json, job*/)
#   GOSSAMER=path/to/gossamer scripts/chaos.sh ...   runs with that binary (no build)
#
# Needs root and iproute2 (scripts/deps.sh --lab): without them one line, exit 2.
set -euo pipefail
cd "${0%/*}/.."

missing=()
[ "$EUID" -eq 0 ] || missing+=("root")
command -v ip >/dev/null 2>&1 || missing+=("ip")
command -v tc >/dev/null 2>&1 || missing+=("tc")
command -v python3 >/dev/null 2>&1 || missing+=("python3")
if [ ${#missing[@]} -gt 0 ]; then
  echo "scripts/chaos.sh: the chaos run needs root, iproute2 (ip, tc) and python3; missing: ${missing[*]}; run it as root after scripts/deps.sh --lab" >&2
  exit 2
fi
for arg in "$@"; do
  case "$arg" in -h|--help) exec python3 scripts/lab/chaos.py --help ;; esac
done
if [ -z "${GOSSAMER:-}" ]; then
  echo "== building gossamer (release preset) =="
  cmake --preset release >/dev/null
  cmake --build --preset release -j "$(nproc)" --target gossamer
  export GOSSAMER=build/release/cli/gossamer
fi
# shellcheck source=blas_env.sh
. scripts/blas_env.sh  # one BLAS thread per peer
exec python3 scripts/lab/chaos.py "$@"
