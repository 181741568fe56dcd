// The x86-64 group kernels, compiled for AVX2+FMA and for AVX-512F with per-function target
// attributes so that the rest of the build keeps the baseline ISA; mixing.cpp dispatches at run
// time. Both paths round alike: acc = w_out*out (or w_0*src_0), then one FMA per term in order.
// Heads (up to the 64-byte boundary of out, where streaming stores need alignment) and tails are
// done with masked loads and stores, which never touch memory outside the masks.
#include "mixing_kernels.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <utility>

namespace gossamer::mixing {
namespace {

// Elements before out reaches a 64-byte boundary (out is float aligned), at most n.
std::size_t head_length(const float* out, std::size_t n) {
    const auto misalign = reinterpret_cast<std::uintptr_t>(out) & 63u;
    return std::min<std::size_t>(n, ((64u - misalign) & 63u) / sizeof(float));
}

// ---- AVX-512F: 16 lanes, __mmask16 for partial vectors -------------------------------------

template <bool Masked>
[[gnu::target("avx512f"), gnu::always_inline]] inline __m512 load16(const float* p, __mmask16 m) {
    if constexpr (Masked) return _mm512_maskz_loadu_ps(m, p);
    return _mm512_loadu_ps(p);
}

template <int N, bool ReadOut, bool Masked>
[[gnu::target("avx512f"), gnu::always_inline]] inline __m512 combine16(const float* out,
                                                                       const float* const* s,
                                                                       const __m512* w,
                                                                       __m512 w_out, std::size_t i,
                                                                       __mmask16 m) {
    __m512 acc;
    int j = 0;
    if constexpr (ReadOut) {
        acc = _mm512_mul_ps(w_out, load16<Masked>(out + i, m));
    } else if constexpr (N == 0) {
        return _mm512_setzero_ps();
    } else {
        acc = _mm512_mul_ps(w[0], load16<Masked>(s[0] + i, m));
        j = 1;
    }
#pragma GCC unroll 8
    for (; j < N; ++j) acc = _mm512_fmadd_ps(w[j], load16<Masked>(s[j] + i, m), acc);
    return acc;
}

template <int N, bool ReadOut, bool Stream>
[[gnu::target("avx512f")]] void body16(float* out, const float* const* s, const __m512* w,
                                       __m512 wo, std::size_t n) {
    std::size_t i = head_length(out, n);
    if (i > 0) {
        const auto m = static_cast<__mmask16>((1u << i) - 1);
        _mm512_mask_storeu_ps(out, m, combine16<N, ReadOut, true>(out, s, w, wo, 0, m));
    }
    // Two vectors (two cache lines) per step: both are computed before either is stored.
    for (; i + 32 <= n; i += 32) {
        const __m512 a = combine16<N, ReadOut, false>(out, s, w, wo, i, 0);
        const __m512 b = combine16<N, ReadOut, false>(out, s, w, wo, i + 16, 0);
        if constexpr (Stream) {
            _mm512_stream_ps(out + i, a);
            _mm512_stream_ps(out + i + 16, b);
        } else {
            _mm512_store_ps(out + i, a);
            _mm512_store_ps(out + i + 16, b);
        }
    }
    if (i + 16 <= n) {
        _mm512_store_ps(out + i, combine16<N, ReadOut, false>(out, s, w, wo, i, 0));
        i += 16;
    }
    if (i < n) {
        const auto m = static_cast<__mmask16>((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(out + i, m, combine16<N, ReadOut, true>(out, s, w, wo, i, m));
    }
}

template <int N, bool ReadOut>
[[gnu::target("avx512f")]] void group16(float* out, const float* const* src, const float* w,
                                        float w_out, std::size_t n, bool stream) {
    const float* s[N > 0 ? N : 1] = {};
    __m512 wv[N > 0 ? N : 1] = {};
    for (int j = 0; j < N; ++j) {
        s[j] = src[j];
        wv[j] = _mm512_set1_ps(w[j]);
    }
    const __m512 wo = _mm512_set1_ps(w_out);
    if (stream)
        body16<N, ReadOut, true>(out, s, wv, wo, n);
    else
        body16<N, ReadOut, false>(out, s, wv, wo, n);
}

// ---- AVX2 + FMA: 8 lanes, integer lane masks for partial vectors ---------------------------

[[gnu::target("avx2,fma"), gnu::always_inline]] inline __m256i lanes8(std::size_t count) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

template <bool Masked>
[[gnu::target("avx2,fma"), gnu::always_inline]] inline __m256 load8(const float* p, __m256i m) {
    if constexpr (Masked) return _mm256_maskload_ps(p, m);
    return _mm256_loadu_ps(p);
}

template <int N, bool ReadOut, bool Masked>
[[gnu::target("avx2,fma"), gnu::always_inline]] inline __m256 combine8(const float* out,
                                                                       const float* const* s,
                                                                       const __m256* w,
                                                                       __m256 w_out, std::size_t i,
                                                                       __m256i m) {
    __m256 acc;
    int j = 0;
    if constexpr (ReadOut) {
        acc = _mm256_mul_ps(w_out, load8<Masked>(out + i, m));
    } else if constexpr (N == 0) {
        return _mm256_setzero_ps();
    } else {
        acc = _mm256_mul_ps(w[0], load8<Masked>(s[0] + i, m));
        j = 1;
    }
#pragma GCC unroll 8
    for (; j < N; ++j) acc = _mm256_fmadd_ps(w[j], load8<Masked>(s[j] + i, m), acc);
    return acc;
}

// Up to 8 elements from out + i through lane masks.
template <int N, bool ReadOut>
[[gnu::target("avx2,fma"), gnu::always_inline]] inline void partial8(float* out,
                                                                     const float* const* s,
                                                                     const __m256* w, __m256 wo,
                                                                     std::size_t i,
                                                                     std::size_t count) {
    const __m256i m = lanes8(count);
    _mm256_maskstore_ps(out + i, m, combine8<N, ReadOut, true>(out, s, w, wo, i, m));
}

template <int N, bool ReadOut, bool Stream>
[[gnu::target("avx2,fma")]] void body8(float* out, const float* const* s, const __m256* w,
                                       __m256 wo, std::size_t n) {
    const std::size_t head = head_length(out, n);
    std::size_t i = 0;
    for (; i < head; i += 8)
        partial8<N, ReadOut>(out, s, w, wo, i, std::min<std::size_t>(8, head - i));
    i = head;
    for (; i + 32 <= n; i += 32) {
        const __m256 a = combine8<N, ReadOut, false>(out, s, w, wo, i, __m256i{});
        const __m256 b = combine8<N, ReadOut, false>(out, s, w, wo, i + 8, __m256i{});
        const __m256 c = combine8<N, ReadOut, false>(out, s, w, wo, i + 16, __m256i{});
        const __m256 d = combine8<N, ReadOut, false>(out, s, w, wo, i + 24, __m256i{});
        if constexpr (Stream) {
            _mm256_stream_ps(out + i, a);
            _mm256_stream_ps(out + i + 8, b);
            _mm256_stream_ps(out + i + 16, c);
            _mm256_stream_ps(out + i + 24, d);
        } else {
            _mm256_store_ps(out + i, a);
            _mm256_store_ps(out + i + 8, b);
            _mm256_store_ps(out + i + 16, c);
            _mm256_store_ps(out + i + 24, d);
        }
    }
    for (; i + 8 <= n; i += 8)
        _mm256_store_ps(out + i, combine8<N, ReadOut, false>(out, s, w, wo, i, __m256i{}));
    if (i < n) partial8<N, ReadOut>(out, s, w, wo, i, n - i);
}

template <int N, bool ReadOut>
[[gnu::target("avx2,fma")]] void group8(float* out, const float* const* src, const float* w,
                                        float w_out, std::size_t n, bool stream) {
    const float* s[N > 0 ? N : 1] = {};
    __m256 wv[N > 0 ? N : 1] = {};
    for (int j = 0; j < N; ++j) {
        s[j] = src[j];
        wv[j] = _mm256_set1_ps(w[j]);
    }
    const __m256 wo = _mm256_set1_ps(w_out);
    if (stream)
        body8<N, ReadOut, true>(out, s, wv, wo, n);
    else
        body8<N, ReadOut, false>(out, s, wv, wo, n);
}

void store_fence() {
    _mm_sfence();
}

template <template <int, bool> class K, int... N>
constexpr KernelTable table(std::integer_sequence<int, N...>) {
    return {{{K<N, false>::fn...}, {K<N, true>::fn...}}, &store_fence};
}
template <int N, bool R>
struct Avx512 {
    static constexpr GroupKernel fn = &group16<N, R>;
};
template <int N, bool R>
struct Avx2 {
    static constexpr GroupKernel fn = &group8<N, R>;
};

}  // namespace

const KernelTable* avx2_kernels() {
    static constexpr KernelTable t = table<Avx2>(std::make_integer_sequence<int, kGroup + 1>{});
    return &t;
}

const KernelTable* avx512_kernels() {
    static constexpr KernelTable t = table<Avx512>(std::make_integer_sequence<int, kGroup + 1>{});
    return &t;
}

}  // namespace gossamer::mixing

#else  // not x86-64 with GCC or Clang: the scalar kernels only

namespace gossamer::mixing {
const KernelTable* avx2_kernels() {
    return nullptr;
}
const KernelTable* avx512_kernels() {
    return nullptr;
}
}  // namespace gossamer::mixing

#endif
