#!/usr/bin/env bash
# Installs dependencies, configures, builds (warnings are errors) and runs every test.
# Exits non-zero on any failure. GOSSAMER_PRESET picks another preset (debug, asan).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
preset="${GOSSAMER_PRESET:-ci}"
jobs="$(nproc)"
cmake --preset "$preset"
cmake --build --preset "$preset" -j "$jobs"
ctest --preset "$preset" -j "$jobs" --timeout 900
