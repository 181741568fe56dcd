// Mixing kernels: one grid-stride pass, 16-byte loads and stores when every pointer allows them,
// one fmaf per term in the order of the CPU FMA paths (mixing_simd.cpp), so the two agree
// bit for bit.
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "check.cuh"
#include "gossamer/cuda/kernels.hpp"

namespace gossamer::cuda {
namespace {

constexpr int kGroup = 8;  // terms per pass, as on the CPU

struct GroupArgs {
    float* out;
    const float* src[kGroup];
    float w[kGroup];
    float w_out;
    std::size_t n;
};

__device__ __forceinline__ float4 load4(const float* p, std::size_t i) {
    return __ldg(reinterpret_cast<const float4*>(p) + i);
}
__device__ __forceinline__ float4 mul4(float w, float4 v) {
    return make_float4(__fmul_rn(w, v.x), __fmul_rn(w, v.y), __fmul_rn(w, v.z), __fmul_rn(w, v.w));
}
__device__ __forceinline__ float4 fma4(float w, float4 v, float4 acc) {
    return make_float4(fmaf(w, v.x, acc.x), fmaf(w, v.y, acc.y), fmaf(w, v.z, acc.z),
                       fmaf(w, v.w, acc.w));
}

// out[i] <- (ReadOut ? w_out*out[i] : 0) + sum_{j<N} w[j]*src[j][i]
template <int N, bool ReadOut>
__global__ void __launch_bounds__(detail::kThreads) group_kernel(GroupArgs a, bool vec) {
    const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
    const std::size_t tid = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x;
    std::size_t done = 0;
    if (vec) {
        const std::size_t n4 = a.n / 4;
        auto* out4 = reinterpret_cast<float4*>(a.out);
        for (std::size_t i = tid; i < n4; i += stride) {
            float4 s[N > 0 ? N : 1];
#pragma unroll
            for (int j = 0; j < N; ++j) s[j] = load4(a.src[j], i);  // all loads in flight first
            float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
            int j = 0;
            if constexpr (ReadOut) {
                acc = mul4(a.w_out, out4[i]);
            } else if constexpr (N > 0) {
                acc = mul4(a.w[0], s[0]);
                j = 1;
            }
#pragma unroll
            for (; j < N; ++j) acc = fma4(a.w[j], s[j], acc);
            out4[i] = acc;
        }
        done = n4 * 4;
    }
    for (std::size_t i = done + tid; i < a.n; i += stride) {
        float acc = 0.f;
        int j = 0;
        if constexpr (ReadOut) {
            acc = __fmul_rn(a.w_out, a.out[i]);
        } else if constexpr (N > 0) {
            acc = __fmul_rn(a.w[0], a.src[0][i]);
            j = 1;
        }
#pragma unroll
        for (; j < N; ++j) acc = fmaf(a.w[j], a.src[j][i], acc);
        a.out[i] = acc;
    }
}

using Kernel = void (*)(GroupArgs, bool);

template <bool R, int... N>
constexpr auto row(std::integer_sequence<int, N...>) {
    return std::array<Kernel, sizeof...(N)>{&group_kernel<N, R>...};
}

__global__ void debias_kernel(float* z, const float* x, double w, std::size_t n) {
    const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
    for (std::size_t i = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride)
        z[i] = static_cast<float>(static_cast<double>(x[i]) / w);
}

__global__ void divide_kernel(float* y, float d, std::size_t n) {
    const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
    for (std::size_t i = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = __fdiv_rn(y[i], d);
}

__global__ void scale_double_kernel(float* y, double a, const float* x, std::size_t n) {
    const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
    for (std::size_t i = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = static_cast<float>(__dmul_rn(a, static_cast<double>(x[i])));
}

bool overlaps(const float* a, const float* b, std::size_t n) {
    const auto pa = reinterpret_cast<std::uintptr_t>(a), pb = reinterpret_cast<std::uintptr_t>(b);
    return pa < pb + n * sizeof(float) && pb < pa + n * sizeof(float);
}

void require(bool ok, const std::string& what) {
    if (!ok) throw Error(what);
}

// out <- (read_out ? w_out*out : 0) + sum_j w_j*t_j, in groups of kGroup terms (later groups
// read out back with weight 1, which is exact: the same rounding as one long FMA chain).
void run(const char* fn, float* out, bool read_out, float w_out, std::span<const DeviceTerm> terms,
         std::size_t n, void* stream) {
    if (n == 0) return;
    require(out != nullptr, std::string(fn) + ": the output is a null pointer");
    bool vec = detail::aligned16(out);
    for (std::size_t j = 0; j < terms.size(); ++j) {
        require(terms[j].data != nullptr,
                std::string(fn) + ": term " + std::to_string(j) + " is a null pointer");
        vec = vec && detail::aligned16(terms[j].data);
    }
    static constexpr auto kernels = std::array{row<false>(std::make_integer_sequence<int, 9>{}),
                                               row<true>(std::make_integer_sequence<int, 9>{})};
    const unsigned grid = detail::grid_for(vec ? (n + 3) / 4 : n);
    std::size_t g = 0;
    do {
        const std::size_t count = std::min<std::size_t>(kGroup, terms.size() - g);
        GroupArgs a{};
        a.out = out;
        a.n = n;
        for (std::size_t j = 0; j < count; ++j) {
            a.src[j] = terms[g + j].data;
            a.w[j] = terms[g + j].weight;
        }
        const bool first = g == 0;
        a.w_out = first ? w_out : 1.0f;
        kernels[first ? read_out : true]
               [count]<<<grid, detail::kThreads, 0, detail::as_stream(stream)>>>(a, vec);
        detail::check_launch(fn);
        g += count;
    } while (g < terms.size());
}

void check_terms(const char* fn, const float* out, std::span<const DeviceTerm> terms,
                 std::size_t n) {
    for (std::size_t j = 0; j < terms.size(); ++j)
        require(!overlaps(out, terms[j].data, n), std::string(fn) + ": the output overlaps term " +
                                                      std::to_string(j) +
                                                      "; fold its weight into the self weight");
}

void check_in_place(const char* fn, const float* out, const float* in, std::size_t n) {
    require(in == out || !overlaps(out, in, n),
            std::string(fn) +
                ": the output partially overlaps an input; use the same buffer "
                "(in place) or a disjoint one");
}

}  // namespace

void mix(float* x, float w_self, std::span<const DeviceTerm> terms, std::size_t n, void* stream) {
    check_terms("cuda::mix", x, terms, n);
    run("cuda::mix", x, true, w_self, terms, n, stream);
}

void mix_into(float* out, std::span<const DeviceTerm> terms, std::size_t n, void* stream) {
    check_terms("cuda::mix_into", out, terms, n);
    run("cuda::mix_into", out, false, 0.0f, terms, n, stream);
}

void scale_copy(float* y, float a, const float* x, std::size_t n, void* stream) {
    check_in_place("cuda::scale_copy", y, x, n);
    const DeviceTerm t[] = {{x, a}};
    run("cuda::scale_copy", y, false, 0.0f, t, n, stream);
}

void axpy(float* y, float a, const float* x, std::size_t n, void* stream) {
    check_in_place("cuda::axpy", y, x, n);
    const DeviceTerm t[] = {{x, a}};
    run("cuda::axpy", y, true, 1.0f, t, n, stream);  // 1*y is exact
}

void delta(float* d, const float* x, const float* x_hat, std::size_t n, void* stream) {
    check_in_place("cuda::delta", d, x, n);
    check_in_place("cuda::delta", d, x_hat, n);
    // 1*x is exact and the fmaf then rounds x - x_hat once, as a subtraction does.
    const DeviceTerm t[] = {{x, 1.0f}, {x_hat, -1.0f}};
    run("cuda::delta", d, false, 0.0f, t, n, stream);
}

void debias(float* z, const float* x, double w, std::size_t n, void* stream) {
    require(std::isfinite(w) && w != 0, "cuda::debias: the push-sum weight " + std::to_string(w) +
                                            " must be finite and non-zero");
    check_in_place("cuda::debias", z, x, n);
    if (n == 0) return;
    require(z && x, "cuda::debias: a null pointer");
    debias_kernel<<<detail::grid_for(n), detail::kThreads, 0, detail::as_stream(stream)>>>(z, x, w,
                                                                                           n);
    detail::check_launch("cuda::debias");
}

void scale_double(float* y, double a, const float* x, std::size_t n, void* stream) {
    check_in_place("cuda::scale_double", y, x, n);
    if (n == 0) return;
    require(y && x, "cuda::scale_double: a null pointer");
    scale_double_kernel<<<detail::grid_for(n), detail::kThreads, 0, detail::as_stream(stream)>>>(
        y, a, x, n);
    detail::check_launch("cuda::scale_double");
}

void divide(float* y, float d, std::size_t n, void* stream) {
    require(std::isfinite(d) && d != 0,
            "cuda::divide: the divisor " + std::to_string(d) + " must be finite and non-zero");
    if (n == 0) return;
    require(y != nullptr, "cuda::divide: a null pointer");
    divide_kernel<<<detail::grid_for(n), detail::kThreads, 0, detail::as_stream(stream)>>>(y, d, n);
    detail::check_launch("cuda::divide");
}

}  // namespace gossamer::cuda
