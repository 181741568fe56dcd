#!/usr/bin/env bash
# Installs the Debian packages Gossamer needs; idempotent (skips what is installed).
#   scripts/deps.sh          build, test and demo packages
#   scripts/deps.sh --bench  also the packages benchmark reference programs need
#   scripts/deps.sh --lab    also Slurm (slurm-wlm), for srun jobs (scripts/lab/slurm.sh), and
#                            iproute2 (ip, tc) for the network-namespace lab (docs/operations/lab.md)
#   scripts/deps.sh --fuzz   also clang (libFuzzer) for the fuzz targets (scripts/fuzz.sh)
#   scripts/deps.sh [--bench] [--lab] [--fuzz] --components   print the optional test components those packages
#                            give (for GOSSAMER_REQUIRE, docs/operations/testing.md); installs nothing
# Runs as root, or through sudo when it is available.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config ccache
  libboost-dev libboost-graph-dev libfmt-dev nlohmann-json3-dev doctest-dev
  libopenblas-dev zlib1g-dev libucx-dev
  python3 python3-matplotlib
  dataset-fashion-mnist bible-kjv bible-kjv-text
  pybind11-dev python3-pybind11 python3-pytest python3-torch python3-torchvision
)
bench_packages=(libopenmpi-dev openmpi-bin ucx-utils tmux chromium)
lab_packages=(slurm-wlm iproute2)
fuzz_packages=(clang)
# The optional components of the test suite (tests/support/optional.hpp) that these packages
# provide: pybind11 + torch + pytest (python), python3-matplotlib, dataset-fashion-mnist,
# bible-kjv + bible-kjv-text (kjv: the King James Bible, text data for the GPT); with
# --bench OpenMPI (mpi), ucx-utils (ucx_perftest, ucx_info), tmux (a terminal for gossamer
# launch --live) and chromium (headless: gossamer report's page, docs/operations/report.md); with --lab Slurm (slurm: srun,
# slurmctld and slurmd, started by scripts/lab/slurm.sh as root) and iproute2 (netns: the
# network-namespace lab also needs root and a kernel that lets it make namespaces, docs/operations/lab.md);
# with --fuzz clang and its libFuzzer (fuzz: the libFuzzer runs of scripts/fuzz.sh).
components=(python matplotlib fashion-mnist kjv)
bench_components=(mpi ucx-utils tmux chromium)
lab_components=(slurm netns)
fuzz_components=(fuzz)

print_components=0
for arg in "$@"; do
  case "$arg" in
    --bench) packages+=("${bench_packages[@]}"); components+=("${bench_components[@]}") ;;
    --lab) packages+=("${lab_packages[@]}"); components+=("${lab_components[@]}") ;;
    --fuzz) packages+=("${fuzz_packages[@]}"); components+=("${fuzz_components[@]}") ;;
    --components) print_components=1 ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "scripts/deps.sh: unknown option '$arg'; use --bench, --lab, --fuzz, --components or --help" >&2
       exit 2 ;;
  esac
done
if [ "$print_components" -eq 1 ]; then
  (IFS=,; echo "${components[*]}")
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then sudo=(sudo); else
    echo "deps: missing ${missing[*]}; run this script as root" >&2; exit 1
  fi
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Refresh the package lists only when they are missing or older than a day.
if [ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -mtime -1 2>/dev/null | head -n 1)" ]; then
  "${sudo[@]}" apt-get update -qq
fi
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
