#include "gossamer/core/blas.hpp"

#include <cblas.h>

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

}  // namespace gossamer
