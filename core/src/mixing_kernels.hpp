#pragma once
// Internal to mixing.cpp: the per-instruction-set kernels that do one group of terms.

#include <cstddef>

namespace gossamer::mixing {

/// Terms per kernel call: the unit of grouping (see docs/modules/mixing.md).
inline constexpr int kGroup = 8;

/// out[i] <- (ReadOut ? w_out*out[i] : 0) + sum_{j<N} w[j]*src[j][i] for i < n, N <= kGroup.
/// out may equal a src pointer exactly (each element is read before it is written), never
/// partially overlap one. `stream` asks for non-temporal stores on the 64-byte aligned body;
/// the caller issues `fence` once when it is done streaming.
using GroupKernel = void (*)(float* out, const float* const* src, const float* w, float w_out,
                             std::size_t n, bool stream);

struct KernelTable {
    GroupKernel fn[2][kGroup + 1];  ///< [ReadOut][N]
    void (*fence)();                ///< orders streaming stores; null when the path has none
};

const KernelTable& scalar_kernels();
/// null when this build has no x86-64 kernels (another architecture or compiler)
const KernelTable* avx2_kernels();
const KernelTable* avx512_kernels();

}  // namespace gossamer::mixing
