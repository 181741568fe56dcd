#pragma once
/// Device versions of the mixing helpers of gossamer/core/mixing.hpp and of the push-sum
/// de-bias, on float32 device arrays of n elements. Every call queues one kernel (or, for more
/// than 8 terms, one per group of 8) on `stream` (a cudaStream_t as void*, nullptr: default) and
/// returns without waiting.
///
/// Rounding is that of the CPU FMA paths (AVX2, AVX-512): acc = w_self*x (or w_0*t_0), then one
/// fmaf per term in order, so results are bit-identical to them (docs/operations/gpu.md,
/// "Tolerances"). Aliasing as on the CPU: the output may be an input exactly (in place), mix() and
/// mix_into() outputs may not be a term. Checked on the host: sizes are implied by n, so only the
/// pointer rules and null pointers with n > 0 are checked (gossamer::Error).

#include <cstddef>
#include <span>

namespace gossamer::cuda {

/// One neighbour buffer (device memory, n floats) and its weight.
struct DeviceTerm {
    const float* data = nullptr;
    float weight = 0;
};

/// x <- w_self*x + sum_j w_j*t_j in one pass for up to 8 terms (more: groups of 8, each group a
/// pass that reads and writes x).
void mix(float* x, float w_self, std::span<const DeviceTerm> terms, std::size_t n,
         void* stream = nullptr);
/// out <- sum_j w_j*t_j; out is never read (0 terms give zeros).
void mix_into(float* out, std::span<const DeviceTerm> terms, std::size_t n, void* stream = nullptr);
/// y <- a*x: the push-sum share a peer sends (y may be x: scales in place, its kept share).
void scale_copy(float* y, float a, const float* x, std::size_t n, void* stream = nullptr);
/// y <- y + a*x: absorbing a share, or adding a dense decoded delta to a replica.
void axpy(float* y, float a, const float* x, std::size_t n, void* stream = nullptr);
/// d <- x - x_hat: choco's delta against the replica (d may be x or x_hat).
void delta(float* d, const float* x, const float* x_hat, std::size_t n, void* stream = nullptr);
/// y <- float(a * double(x)): push-sum's shares and x = w z as sgp and async compute them on the
/// CPU (product in double, one rounding to float). y may be x.
void scale_double(float* y, double a, const float* x, std::size_t n, void* stream = nullptr);
/// y <- y / d, IEEE-rounded as on the CPU (the all-reduce's average). d must be finite and
/// non-zero (Error).
void divide(float* y, float d, std::size_t n, void* stream = nullptr);
/// z <- float(double(x) / w): the push-sum de-biased model, rounded as sgp and async do on the
/// CPU (division in double, one rounding to float). w must be finite and non-zero (Error).
void debias(float* z, const float* x, double w, std::size_t n, void* stream = nullptr);

}  // namespace gossamer::cuda
