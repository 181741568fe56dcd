#!/usr/bin/env bash
# The GPU check: builds the CPU/GPU parity tests and the device benchmark with nvcc alone (no
# CMake, UCX, Boost or BLAS: the GPU machine has only CUDA), runs them and writes the results
# under $OUT (default build/gpu-check/out). docs/operations/gpu.md, "Running the GPU check".
#
#   scripts/gpu_check.sh prepare   # here: copy the header-only deps (doctest, fmt, nlohmann)
#                                  #   into build/gpu-check/include, which the run carries along
#   scripts/gpu_check.sh build     # compile only (checks the standalone build on any machine)
#   scripts/gpu_check.sh [run]     # on the GPU machine: build, run tests and benchmark
#
# Environment: NVCC (default nvcc on PATH, else /usr/local/cuda/bin/nvcc), GPU_ARCH (default 90:
# sm_90, H100/H200), GPU_BENCH_MIB (default 256), GPU_BENCH_REPEATS (default 20).
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-run}"
dir=build/gpu-check
inc="$dir/include"

if [[ "$mode" == prepare ]]; then
    mkdir -p "$inc/doctest"
    cp /usr/include/doctest/doctest.h "$inc/doctest/"
    cp -r /usr/include/fmt /usr/include/nlohmann "$inc/"
    echo "gpu_check: headers in $inc ($(du -sh "$inc" | cut -f1)); carry $inc to the GPU machine"
    exit 0
fi
if [[ "$mode" != build && "$mode" != run ]]; then
    echo "gpu_check: unknown mode '$mode'; use prepare, build or run" >&2
    exit 2
fi
if [[ ! -f "$inc/doctest/doctest.h" || ! -d "$inc/fmt" || ! -d "$inc/nlohmann" ]]; then
    echo "gpu_check: $inc lacks doctest/fmt/nlohmann; run 'scripts/gpu_check.sh prepare' first" >&2
    exit 2
fi
nvcc="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
[[ -x "$nvcc" ]] || { echo "gpu_check: no nvcc (set NVCC)" >&2; exit 2; }
arch="${GPU_ARCH:-90}"
out="${OUT:-$dir/out}"
mkdir -p "$dir/obj" "$out"

flags=(-std=c++20 -O3 -DNDEBUG -DFMT_HEADER_ONLY -DGOSSAMER_HAVE_CUDA
       -gencode "arch=compute_$arch,code=sm_$arch"
       -Icore/include -Icore/cuda/include -Ioptimizers/local/include -Ioptimizers/compress/include
       -Ioptimizers/protocol/include -Ioptimizers/cuda/include -Itests
       -Ibench -Itopology/include -Itransport/include -I"$inc")
cuda_sources=(core/cuda/src/runtime.cu core/cuda/src/mixing.cu core/cuda/src/compress.cu
              core/cuda/src/topk.cu core/cuda/src/staging.cu core/cuda/src/ucx_probe.cpp)
# The CPU reference: the very kernels and codecs the CPU build runs (header-only fmt and json).
cpu_sources=(core/src/error.cpp core/src/json.cpp core/src/mixing.cpp core/src/mixing_simd.cpp
             optimizers/compress/src/compressor.cpp optimizers/cuda/src/device_codec.cpp
             optimizers/cuda/src/cuda_device.cpp optimizers/protocol/src/edge_replica.cpp
             optimizers/protocol/src/push_sum_math.cpp optimizers/protocol/src/gossip_mix.cpp)
test_sources=(tests/main.cpp tests/cuda/test_parity_mixing.cpp tests/cuda/test_parity_compress.cpp
              tests/cuda/test_device_codec.cpp tests/cuda/test_staging.cpp
              tests/cuda/test_host_checks.cpp tests/cuda/test_cuda_device.cpp
              tests/cuda/test_cuda_device_codec.cpp tests/cuda/test_cuda_protocol_parts.cpp)
bench_sources=(bench/mix_device.cpp bench/mix_device_main.cpp)

# .cu files go through nvcc, .cpp files straight to the host compiler (nvcc's handling of .cpp
# trips over fmt's consteval format strings); nvcc links.
obj() { echo "$dir/obj/$(echo "$1" | tr / _).o"; }
compile() {
    case "$1" in
        *.cu) "$nvcc" $flags_str -Icore/src -c "$1" -o "$(obj "$1")" ;;
        *) "$cxx" $cxx_flags -Icore/src -c "$1" -o "$(obj "$1")" ;;
    esac
}
cxx="${CXX:-g++}"
cxx_flags="-std=c++20 -O3 -DNDEBUG -DFMT_HEADER_ONLY -DGOSSAMER_HAVE_CUDA -Icore/include \
-Icore/cuda/include -Ioptimizers/local/include -Ioptimizers/compress/include \
-Ioptimizers/protocol/include -Ioptimizers/cuda/include -Itests -Ibench \
-Itopology/include -Itransport/include -I$inc"
export nvcc dir cxx cxx_flags flags_str="${flags[*]}"
export -f compile obj
start=$(date +%s)
printf '%s\n' "${cuda_sources[@]}" "${cpu_sources[@]}" "${test_sources[@]}" "${bench_sources[@]}" |
    xargs -P "$(nproc)" -I{} bash -c 'compile {}'
objs() { for s in "$@"; do obj "$s"; done; }
"$nvcc" -o "$dir/gpu_parity" $(objs "${cuda_sources[@]}" "${cpu_sources[@]}" "${test_sources[@]}")
"$nvcc" -o "$dir/gpu_bench" $(objs "${cuda_sources[@]}" "${cpu_sources[@]}" "${bench_sources[@]}")
echo "gpu_check: built $dir/gpu_parity and $dir/gpu_bench for sm_$arch in $(( $(date +%s) - start )) s"
[[ "$mode" == build ]] && exit 0

status=0
{ nvidia-smi || true; } > "$out/nvidia-smi.txt" 2>&1
# cuda-device required: a case without a device fails instead of skipping (docs/operations/testing.md).
GOSSAMER_REQUIRE=cuda-device "$dir/gpu_parity" --duration=true 2>&1 | tee "$out/parity.txt" ||
    status=1
if grep -q "cuda-device (GOSSAMER_REQUIRE) is missing" "$out/parity.txt"; then
    echo "gpu_check: no CUDA device here, so the parity cases were skipped, not tested" >&2
    status=1
fi
"$dir/gpu_bench" --bytes "${GPU_BENCH_MIB:-256}" --repeats "${GPU_BENCH_REPEATS:-20}" \
    --json "$out/bench.json" 2>&1 | tee "$out/bench.txt" || status=1
echo "gpu_check: results in $out (status $status)"
exit "$status"
