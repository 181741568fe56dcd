// The finiteness check: x - x is 0 for every finite x and NaN for NaN and the infinities, so a
// sum of (x - x) over a block stays 0 exactly while the block is finite. Blocks of 4096 values
// keep the early exit cheap; the index of the culprit is found by a scalar pass over the block
// that failed (only ever on the refusal path).
#include "gossamer/core/finite.hpp"

#include <algorithm>
#include <cmath>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace gossamer {
namespace {

constexpr std::size_t kBlock = 4096;

bool block_finite_scalar(const float* p, std::size_t n) noexcept {
    float acc = 0.0f;
    for (std::size_t i = 0; i < n; ++i) acc += p[i] - p[i];
    return acc == 0.0f;
}

#if defined(__x86_64__) && defined(__GNUC__)
[[gnu::target("avx512f")]] bool block_finite_avx512(const float* p, std::size_t n) noexcept {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    std::size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        const __m512 v0 = _mm512_loadu_ps(p + i), v1 = _mm512_loadu_ps(p + i + 16);
        const __m512 v2 = _mm512_loadu_ps(p + i + 32), v3 = _mm512_loadu_ps(p + i + 48);
        a0 = _mm512_add_ps(a0, _mm512_sub_ps(v0, v0));
        a1 = _mm512_add_ps(a1, _mm512_sub_ps(v1, v1));
        a2 = _mm512_add_ps(a2, _mm512_sub_ps(v2, v2));
        a3 = _mm512_add_ps(a3, _mm512_sub_ps(v3, v3));
    }
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_loadu_ps(p + i);
        a0 = _mm512_add_ps(a0, _mm512_sub_ps(v, v));
    }
    if (i < n) {
        const auto m = static_cast<__mmask16>((1u << (n - i)) - 1);
        const __m512 v = _mm512_maskz_loadu_ps(m, p + i);
        a0 = _mm512_add_ps(a0, _mm512_sub_ps(v, v));
    }
    const __m512 s = _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
    return _mm512_cmp_ps_mask(s, _mm512_setzero_ps(), _CMP_EQ_OQ) == 0xFFFF;
}

[[gnu::target("avx2")]] bool block_finite_avx2(const float* p, std::size_t n) noexcept {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    std::size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m256 v0 = _mm256_loadu_ps(p + i), v1 = _mm256_loadu_ps(p + i + 8);
        const __m256 v2 = _mm256_loadu_ps(p + i + 16), v3 = _mm256_loadu_ps(p + i + 24);
        a0 = _mm256_add_ps(a0, _mm256_sub_ps(v0, v0));
        a1 = _mm256_add_ps(a1, _mm256_sub_ps(v1, v1));
        a2 = _mm256_add_ps(a2, _mm256_sub_ps(v2, v2));
        a3 = _mm256_add_ps(a3, _mm256_sub_ps(v3, v3));
    }
    const __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
    const bool body = _mm256_movemask_ps(_mm256_cmp_ps(s, _mm256_setzero_ps(), _CMP_EQ_OQ)) == 0xFF;
    return body && block_finite_scalar(p + i, n - i);
}
#endif

using BlockCheck = bool (*)(const float*, std::size_t) noexcept;

BlockCheck pick() noexcept {
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("avx512f")) return &block_finite_avx512;
    if (__builtin_cpu_supports("avx2")) return &block_finite_avx2;
#endif
    return &block_finite_scalar;
}

}  // namespace

std::optional<std::size_t> first_non_finite(std::span<const float> v) noexcept {
    static const BlockCheck check = pick();
    for (std::size_t b = 0; b < v.size(); b += kBlock) {
        const std::size_t n = std::min(kBlock, v.size() - b);
        if (check(v.data() + b, n)) continue;
        for (std::size_t i = b; i < b + n; ++i)
            if (!std::isfinite(v[i])) return i;
    }
    return std::nullopt;
}

std::optional<std::size_t> largest_magnitude(std::span<const float> v) noexcept {
    if (v.empty()) return std::nullopt;
    // Blocks of a plain max (which the compiler vectorises), then the index in the block.
    std::size_t best_block = 0;
    float best = -1.0f;
    for (std::size_t b = 0; b < v.size(); b += kBlock) {
        const std::size_t n = std::min(kBlock, v.size() - b);
        float m = 0.0f;
        for (std::size_t i = b; i < b + n; ++i) m = std::max(m, std::fabs(v[i]));
        if (m > best) {
            best = m;
            best_block = b;
        }
    }
    const std::size_t end = std::min(best_block + kBlock, v.size());
    for (std::size_t i = best_block; i < end; ++i)
        if (std::fabs(v[i]) == best) return i;
    return best_block;
}

const char* non_finite_name(float v) noexcept {
    if (std::isnan(v)) return "NaN";
    return v > 0 ? "+inf" : "-inf";
}

}  // namespace gossamer
