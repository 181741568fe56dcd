#pragma once
/// The BLAS library the models use (OpenBLAS): thread count and which kernels it picked.

#include <string>

namespace gossamer {

/// Sets the number of BLAS threads (>= 1). The launcher and benchmarks use 1 per peer.
void set_blas_threads(int threads);
/// BLAS threads currently in use.
int blas_threads();
/// The kernel family OpenBLAS chose for this CPU, e.g. "SkylakeX", "Haswell" or "Prescott"
/// (generic); "unknown" for another BLAS. OPENBLAS_CORETYPE overrides OpenBLAS's choice.
std::string blas_core();

}  // namespace gossamer
