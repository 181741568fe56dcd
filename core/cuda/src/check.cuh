#pragma once
// Internal to gossamer::cuda: error checks and grid sizing shared by the kernel files.

#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "gossamer/core/error.hpp"

namespace gossamer::cuda::detail {

/// Throws gossamer::Error "what: <CUDA error string>" when status is not cudaSuccess.
inline void check(cudaError_t status, const std::string& what) {
    if (status != cudaSuccess) throw Error(what + ": " + cudaGetErrorString(status));
}

/// After a kernel launch: throws on a launch error (bad configuration, no device).
inline void check_launch(const char* kernel) {
    check(cudaGetLastError(), std::string("launching ") + kernel);
}

inline cudaStream_t as_stream(void* s) {
    return static_cast<cudaStream_t>(s);
}

inline constexpr int kThreads = 256;

/// Blocks for `work` items of kThreads threads each, capped at 16 blocks per SM: enough
/// resident warps to keep HBM busy, the rest done by the grid-stride loops.
unsigned grid_for(std::size_t work);

/// Whether every pointer is 16-byte aligned (float4 / uint4 loads are legal).
inline bool aligned16(const void* p) {
    return (reinterpret_cast<std::size_t>(p) & 15u) == 0;
}

}  // namespace gossamer::cuda::detail
