#!/usr/bin/env bash
# Installs dependencies, configures, builds (warnings are errors) and runs every test.
# Exits non-zero on any failure. GOSSAMER_PRESET picks another preset (minimal, debug, asan).
# GOSSAMER_REQUIRE=mpi,python,... turns the skip of a listed optional component into a failure
# (docs/operations/testing.md; `scripts/deps.sh --bench --components` lists what the packages provide).
set -euo pipefail
cd "$(dirname "$0")/.."

known=(python matplotlib fashion-mnist kjv mpi ucx-utils tmux chromium slurm cuda-build cuda-device netns fuzz tmpfs)
IFS=, read -r -a required <<< "${GOSSAMER_REQUIRE:-}"
for c in "${required[@]}"; do
  [ -z "$c" ] && continue
  if ! printf '%s\n' "${known[@]}" | grep -qx -- "$c"; then
    echo "scripts/test.sh: GOSSAMER_REQUIRE: unknown component '$c'; known: ${known[*]}" >&2
    exit 2
  fi
done

preset="${GOSSAMER_PRESET:-ci}"
jobs="$(nproc)"
phase_start=$SECONDS
phases=()
phase() { phases+=("$(printf '%-10s %5d s' "$1" $((SECONDS - phase_start)))"); phase_start=$SECONDS; }

scripts/deps.sh
phase deps
echo "test.sh: preset $preset, GOSSAMER_REQUIRE=${GOSSAMER_REQUIRE:-(none)}"
cmake --preset "$preset"
phase configure
cmake --build --preset "$preset" -j "$jobs"
phase build
status=0
junit="$PWD/build/$preset/ctest-junit.xml"
rm -f "$junit"
ctest --preset "$preset" -j "$jobs" --timeout 900 --output-junit "$junit" || status=$?
phase test
echo "test.sh: preset $preset, seconds per suite (summed over its tests; ctest -j $jobs):"
python3 scripts/test_times.py "$junit" | sed 's/^/  /' || true
echo "test.sh: preset $preset, wall time per phase:"
printf '  %s\n' "${phases[@]}"
if command -v ccache >/dev/null; then ccache -s 2>/dev/null | grep -E '^ *Hits:' | head -n 1 | sed 's/^ */  ccache /'; fi
exit "$status"
