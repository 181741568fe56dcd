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
/// When OpenBLAS fell back to generic kernels ("Prescott", "Core2", "Nehalem") on a CPU that
/// has AVX-512 or AVX2+FMA, the OPENBLAS_CORETYPE value that fits the CPU ("SkylakeX" or
/// "Haswell"); otherwise nullptr. OpenBLAS 0.3.21 does not recognise some newer Xeons.
const char* better_blas_core();

}  // namespace gossamer
