#!/usr/bin/env bash
# Runs every libFuzzer target of tests/fuzz (docs/operations/reliability.md, "Fuzzing") for a bounded time:
#   scripts/fuzz.sh [--seconds N | --minutes N] [--jobs J] [TARGET...]
# Builds the fuzz tree (preset fuzz: clang, ASan + UBSan, build/fuzz), then runs each target
# (all by default; names as in tests/fuzz/fuzz_NAME.cpp) for N seconds (default 30), J at a time
# (default 2), from the seed corpus and the regression inputs. Prints one line of figures per
# target (executions, coverage, corpus); a crash, hang or sanitizer report fails the run and
# leaves its input in build/fuzz/tests/fuzz/work/artifacts/NAME/ (docs/operations/reliability.md says
# what to do with it). Without clang it reports the skip (exit 0), or fails when
# GOSSAMER_REQUIRE names the component fuzz (docs/operations/testing.md). The inputs a run found stay in
# build/fuzz/tests/fuzz/work/corpus/ and seed the next run.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; }
seconds=30
jobs=2
targets=()
number() {  # number FLAG VALUE: a positive whole number, or one line and exit 2
  if ! [[ "${2:-}" =~ ^[1-9][0-9]{0,6}$ ]]; then
    echo "scripts/fuzz.sh: $1 '${2:-}' is not a positive whole number; e.g. $1 30" >&2
    exit 2
  fi
}
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) number "$1" "${2:-}"; seconds="$2"; shift 2 ;;
    --minutes) number "$1" "${2:-}"; seconds=$(( $2 * 60 )); shift 2 ;;
    --jobs) number "$1" "${2:-}"; jobs="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "scripts/fuzz.sh: unknown option '$1'; use --seconds, --minutes, --jobs or --help" >&2
        exit 2 ;;
    *) if [ ! -f "tests/fuzz/fuzz_$1.cpp" ]; then
         known=$(cd tests/fuzz && ls fuzz_*.cpp | sed 's/^fuzz_//; s/\.cpp$//' | tr '\n' ' ')
         echo "scripts/fuzz.sh: unknown target '$1'; the targets are: $known" >&2
         exit 2
       fi
       targets+=("$1"); shift ;;
  esac
done

if ! command -v clang++ >/dev/null; then
  why="clang++ is not on PATH; scripts/deps.sh --fuzz installs clang"
  case ",${GOSSAMER_REQUIRE:-}," in
    *,fuzz,*) echo "required component fuzz (GOSSAMER_REQUIRE) is missing: $why" >&2; exit 1 ;;
  esac
  echo "skipped (optional): fuzz: $why"
  exit 0
fi

start=$SECONDS
cmake --preset fuzz >/dev/null
# CMake drops a cache whose compiler resolved elsewhere and reconfigures without the preset's
# variables: configure once more from scratch when the tree did not come out a fuzz tree.
if ! grep -q '^GOSSAMER_FUZZ:BOOL=ON' build/fuzz/CMakeCache.txt; then
  rm -f build/fuzz/CMakeCache.txt
  cmake --preset fuzz >/dev/null
fi
cmake --build --preset fuzz -j "$jobs"
built=$((SECONDS - start))
work=build/fuzz/tests/fuzz/work
rm -f "$work"/summary-*.txt
filter=()
if [ ${#targets[@]} -gt 0 ]; then
  filter=(-R "^fuzz: ($(IFS='|'; echo "${targets[*]}")) under libFuzzer\$")
fi
status=0
# A run ends by itself after its time; the ctest timeout is the guard against a stuck one.
GOSSAMER_FUZZ_SECONDS="$seconds" ctest --preset fuzz -j "$jobs" --timeout $((seconds + 300)) \
  "${filter[@]}" || status=$?
echo "fuzz.sh: $seconds s per target, $jobs at a time (build ${built} s, total $((SECONDS - start)) s):"
cat "$work"/summary-*.txt 2>/dev/null | sed 's/^/  /' || true
exit "$status"
