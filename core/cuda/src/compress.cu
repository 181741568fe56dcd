// fp16, int8 and random-k kernels with the CPU compressors' wire formats (compressor.cpp).
// Products that the CPU rounds before adding use __fmul_rn/__fadd_rn so that nvcc does not
// contract them into an FMA (the CPU build has no FMA there: -std=c++20 turns contraction off).
#include <cuda_fp16.h>

#include <cstdint>

#include "check.cuh"
#include "gossamer/cuda/compress.hpp"

namespace gossamer::cuda {
namespace {

using detail::kThreads;

// As the CPU's float_to_half: round to nearest even, finite values past 65504 saturate (values
// in [65504, 65520) round to 65504 anyway, so clamping first is the same), NaN -> 0x7e00.
__device__ __forceinline__ std::uint16_t half_bits(float x) {
    const std::uint16_t sign = signbit(x) ? 0x8000u : 0u;
    if (isnan(x)) return sign | 0x7e00u;
    if (isfinite(x)) x = fminf(fmaxf(x, -65504.0f), 65504.0f);
    return __half_as_ushort(__float2half_rn(x));
}

__device__ __forceinline__ float half_value(std::uint16_t h) {
    return __half2float(__ushort_as_half(h));
}

__global__ void fp16_encode_kernel(const float* x, std::size_t n, std::uint16_t* out, bool vec) {
    const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
    const std::size_t tid = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x;
    std::size_t done = 0;
    if (vec) {
        const std::size_t n4 = n / 4;
        for (std::size_t i = tid; i < n4; i += stride) {
            const float4 v = __ldg(reinterpret_cast<const float4*>(x) + i);
            uint2 h;
            h.x = half_bits(v.x) | (std::uint32_t{half_bits(v.y)} << 16);
            h.y = half_bits(v.z) | (std::uint32_t{half_bits(v.w)} << 16);
            reinterpret_cast<uint2*>(out)[i] = h;
        }
        done = n4 * 4;
    }
    for (std::size_t i = done + tid; i < n; i += stride) out[i] = half_bits(x[i]);
}

__global__ void fp16_decode_kernel(const std::uint16_t* in, std::size_t n, float* y, bool vec) {
    const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
    const std::size_t tid = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x;
    std::size_t done = 0;
    if (vec) {
        const std::size_t n4 = n / 4;
        auto* y4 = reinterpret_cast<float4*>(y);
        for (std::size_t i = tid; i < n4; i += stride) {
            const uint2 h = __ldg(reinterpret_cast<const uint2*>(in) + i);
            float4 v = y4[i];
            v.x = __fadd_rn(v.x, half_value(static_cast<std::uint16_t>(h.x & 0xffffu)));
            v.y = __fadd_rn(v.y, half_value(static_cast<std::uint16_t>(h.x >> 16)));
            v.z = __fadd_rn(v.z, half_value(static_cast<std::uint16_t>(h.y & 0xffffu)));
            v.w = __fadd_rn(v.w, half_value(static_cast<std::uint16_t>(h.y >> 16)));
            y4[i] = v;
        }
        done = n4 * 4;
    }
    for (std::size_t i = done + tid; i < n; i += stride) y[i] = __fadd_rn(y[i], half_value(in[i]));
}

// Counter-based rounding draw for value k: 24 uniform bits from a 32-bit hash (two rounds of
// "lowbias32", Wellons) of k mixed with the seed. Cheap enough to stay under the memory time.
__device__ __forceinline__ std::uint32_t mix32(std::uint32_t h) {
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    h *= 0x846ca68bu;
    h ^= h >> 16;
    return h;
}
__device__ __forceinline__ float draw(std::uint64_t seed, std::size_t k) {
    const auto hi = static_cast<std::uint32_t>(k >> 32), lo = static_cast<std::uint32_t>(k);
    const std::uint32_t key = lo ^ (static_cast<std::uint32_t>(seed) + hi * 0x9e3779b9u);
    const std::uint32_t h = mix32(mix32(key) ^ static_cast<std::uint32_t>(seed >> 32));
    return static_cast<float>(h >> 8) * 0x1.0p-24f;
}

__device__ __forceinline__ std::int8_t quantize(float x, float scale, std::uint64_t seed,
                                                std::size_t k) {
    if (!(scale > 0)) return 0;
    const float v = x / scale;  // IEEE division, as on the CPU
    const float down = floorf(v);
    float r = down + (draw(seed, k) < v - down ? 1.0f : 0.0f);
    r = fminf(fmaxf(r, -127.0f), 127.0f);
    return static_cast<std::int8_t>(r);
}

// One warp per int8 block: the max |x| by shuffles, then the codes (the block is in L1/L2 by
// then). With `vec` (x 16-byte aligned, block a multiple of 4, so every block starts aligned)
// lanes take float4s up to the last multiple of 4 in the block, then single values.
__global__ void int8_encode_kernel(const float* x, std::size_t n, std::size_t block,
                                   std::uint64_t seed, std::byte* out, std::size_t nb, bool vec) {
    const unsigned lane = threadIdx.x & 31u;
    const std::size_t warps = std::size_t{gridDim.x} * (blockDim.x / 32);
    auto* codes = reinterpret_cast<std::int8_t*>(out + 4 * nb);
    for (std::size_t b = (std::size_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32; b < nb;
         b += warps) {
        const std::size_t lo = b * block, hi = min(n, lo + block);
        const std::size_t body = vec ? lo + ((hi - lo) & ~std::size_t{3}) : lo;
        float m = 0.f;
        for (std::size_t k = lo + 4 * lane; k < body; k += 128) {
            const float4 v = __ldg(reinterpret_cast<const float4*>(x + k));
            m = fmaxf(m, fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
        }
        for (std::size_t k = body + lane; k < hi; k += 32) m = fmaxf(m, fabsf(x[k]));
#pragma unroll
        for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        const float scale = m / 127.0f;
        if (lane == 0) reinterpret_cast<float*>(out)[b] = scale;
        for (std::size_t k = lo + 4 * lane; k < body; k += 128) {
            const float4 v = __ldg(reinterpret_cast<const float4*>(x + k));
            char4 q;
            q.x = quantize(v.x, scale, seed, k);
            q.y = quantize(v.y, scale, seed, k + 1);
            q.z = quantize(v.z, scale, seed, k + 2);
            q.w = quantize(v.w, scale, seed, k + 3);
            *reinterpret_cast<char4*>(codes + k) = q;
        }
        for (std::size_t k = body + lane; k < hi; k += 32)
            codes[k] = quantize(x[k], scale, seed, k);
    }
}

__global__ void int8_decode_kernel(const std::byte* in, std::size_t n, std::size_t block,
                                   std::size_t nb, float* y) {
    const auto* scales = reinterpret_cast<const float*>(in);
    const auto* codes = reinterpret_cast<const std::int8_t*>(in + 4 * nb);
    const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
    for (std::size_t k = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; k < n; k += stride)
        y[k] = __fadd_rn(y[k], __fmul_rn(static_cast<float>(codes[k]), __ldg(scales + k / block)));
}

// Same, four values per thread: a char4 of codes and a float4 of y (block % 4 == 0 keeps the
// four under one scale), then the last n % 4 one by one.
__global__ void int8_decode4_kernel(const std::byte* in, std::size_t n, std::size_t block,
                                    std::size_t nb, float* y) {
    const auto* scales = reinterpret_cast<const float*>(in);
    const auto* codes = reinterpret_cast<const char4*>(in + 4 * nb);
    auto* y4 = reinterpret_cast<float4*>(y);
    const std::size_t stride = std::size_t{gridDim.x} * blockDim.x, n4 = n / 4;
    for (std::size_t i = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n4; i += stride) {
        const char4 q = codes[i];
        const float s = __ldg(scales + 4 * i / block);
        float4 v = y4[i];
        v.x = __fadd_rn(v.x, __fmul_rn(static_cast<float>(q.x), s));
        v.y = __fadd_rn(v.y, __fmul_rn(static_cast<float>(q.y), s));
        v.z = __fadd_rn(v.z, __fmul_rn(static_cast<float>(q.z), s));
        v.w = __fadd_rn(v.w, __fmul_rn(static_cast<float>(q.w), s));
        y4[i] = v;
    }
    const auto* code = reinterpret_cast<const std::int8_t*>(codes);
    for (std::size_t k = 4 * n4 + std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; k < n;
         k += stride)
        y[k] = __fadd_rn(y[k], __fmul_rn(static_cast<float>(code[k]), __ldg(scales + k / block)));
}

__global__ void gather_kernel(const float* x, const std::uint32_t* idx, std::size_t k, float* out) {
    const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
    for (std::size_t i = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < k; i += stride)
        out[i] = x[idx[i]];
}

__global__ void scatter_add_kernel(const float* values, const std::uint32_t* idx, std::size_t k,
                                   float* y) {
    const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
    for (std::size_t i = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < k; i += stride)
        y[idx[i]] = __fadd_rn(y[idx[i]], values[i]);
}

void require(bool ok, const char* what) {
    if (!ok) throw Error(what);
}

bool aligned(const void* p, std::size_t a) {
    return reinterpret_cast<std::uintptr_t>(p) % a == 0;
}

}  // namespace

void fp16_encode(const float* x, std::size_t n, std::byte* out, void* stream) {
    if (n == 0) return;
    require(x && out, "cuda::fp16_encode: a null pointer");
    require(aligned(out, 2), "cuda::fp16_encode: the output is not 2-byte aligned");
    const bool vec = detail::aligned16(x) && aligned(out, 8);
    fp16_encode_kernel<<<detail::grid_for(vec ? n / 4 : n), kThreads, 0,
                         detail::as_stream(stream)>>>(x, n, reinterpret_cast<std::uint16_t*>(out),
                                                      vec);
    detail::check_launch("cuda::fp16_encode");
}

void fp16_decode_add(const std::byte* in, std::size_t n, float* y, void* stream) {
    if (n == 0) return;
    require(in && y, "cuda::fp16_decode_add: a null pointer");
    require(aligned(in, 2), "cuda::fp16_decode_add: the input is not 2-byte aligned");
    const bool vec = detail::aligned16(y) && aligned(in, 8);
    fp16_decode_kernel<<<detail::grid_for(vec ? n / 4 : n), kThreads, 0,
                         detail::as_stream(stream)>>>(reinterpret_cast<const std::uint16_t*>(in), n,
                                                      y, vec);
    detail::check_launch("cuda::fp16_decode_add");
}

void int8_encode(const float* x, std::size_t n, std::size_t block, std::uint64_t seed,
                 std::byte* out, void* stream) {
    require(block >= 1, "cuda::int8_encode: block must be >= 1");
    if (n == 0) return;
    require(x && out, "cuda::int8_encode: a null pointer");
    require(aligned(out, 4), "cuda::int8_encode: the output is not 4-byte aligned");
    const std::size_t nb = (n + block - 1) / block;
    const bool vec = detail::aligned16(x) && block % 4 == 0;
    const std::size_t warps_per_block = kThreads / 32;
    const std::size_t blocks = std::min<std::size_t>((nb + warps_per_block - 1) / warps_per_block,
                                                     detail::grid_for(nb * 32));
    int8_encode_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, detail::as_stream(stream)>>>(
        x, n, block, seed, out, nb, vec);
    detail::check_launch("cuda::int8_encode");
}

void int8_decode_add(const std::byte* in, std::size_t n, std::size_t block, float* y,
                     void* stream) {
    require(block >= 1, "cuda::int8_decode_add: block must be >= 1");
    if (n == 0) return;
    require(in && y, "cuda::int8_decode_add: a null pointer");
    require(aligned(in, 4), "cuda::int8_decode_add: the input is not 4-byte aligned");
    const std::size_t nb = (n + block - 1) / block;
    const auto s = detail::as_stream(stream);
    if (detail::aligned16(y) && block % 4 == 0)
        int8_decode4_kernel<<<detail::grid_for((n + 3) / 4), kThreads, 0, s>>>(in, n, block, nb, y);
    else
        int8_decode_kernel<<<detail::grid_for(n), kThreads, 0, s>>>(in, n, block, nb, y);
    detail::check_launch("cuda::int8_decode_add");
}

void gather(const float* x, const std::uint32_t* idx, std::size_t k, float* out, void* stream) {
    if (k == 0) return;
    require(x && idx && out, "cuda::gather: a null pointer");
    gather_kernel<<<detail::grid_for(k), kThreads, 0, detail::as_stream(stream)>>>(x, idx, k, out);
    detail::check_launch("cuda::gather");
}

void scatter_add(const float* values, const std::uint32_t* idx, std::size_t k, float* y,
                 void* stream) {
    if (k == 0) return;
    require(values && idx && y, "cuda::scatter_add: a null pointer");
    scatter_add_kernel<<<detail::grid_for(k), kThreads, 0, detail::as_stream(stream)>>>(values, idx,
                                                                                        k, y);
    detail::check_launch("cuda::scatter_add");
}

}  // namespace gossamer::cuda
