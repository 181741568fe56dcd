#!/usr/bin/env bash
# Compares the outputs of two builds of gossamer: the same `gossamer sim` jobs (every algorithm)
# and `gossamer launch --inproc` jobs (the algorithms whose outputs do not depend on thread
# timing) with both binaries, one line per (algorithm, driver, file): same / DIFFERENT (first
# differing line N). For "no behaviour change" refactors (issue 38; docs/operations/testing.md, "Comparing
# two builds").
#
#   scripts/compare_builds.sh OLD_GOSSAMER NEW_GOSSAMER [OUT_DIR]   (default out/compare_builds)
#       [--algorithms A,B] [--drivers sim,launch] [--sim-epochs N|config] [--launch-epochs N]
#       [--reuse-old]
#
# Exit status: 0 all the same, 1 something differs (or a run failed on one side), 2 bad usage.
# About 4 minutes on 2 cores (sim for 1 epoch, launch for 1 epoch); the jobs run one at a time.
set -euo pipefail
here="$(cd "${0%/*}" && pwd)"
command -v python3 >/dev/null 2>&1 || { echo "scripts/compare_builds.sh: needs python3" >&2; exit 2; }
# shellcheck source=scripts/blas_env.sh
. "$here/blas_env.sh"  # the same BLAS kernels and one BLAS thread on both sides
exec python3 "$here/compare_builds.py" "$@"
