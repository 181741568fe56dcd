#include "gossamer/core/blas.hpp"

#include <cblas.h>

#include <string>

namespace gossamer {

void set_blas_threads(int threads) {
#if defined(OPENBLAS_VERSION)
    openblas_set_num_threads(threads < 1 ? 1 : threads);
#else
    (void)threads;
#endif
}

int blas_threads() {
#if defined(OPENBLAS_VERSION)
    return openblas_get_num_threads();
#else
    return 1;
#endif
}

std::string blas_core() {
#if defined(OPENBLAS_VERSION)
    return openblas_get_corename();
#else
    return "unknown";
#endif
}

const char* better_blas_core() {
#if defined(OPENBLAS_VERSION) && (defined(__x86_64__) || defined(__i386__))
    const std::string core = blas_core();
    if (core != "Prescott" && core != "Core2" && core != "Nehalem") return nullptr;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
    return nullptr;
}

}  // namespace gossamer
