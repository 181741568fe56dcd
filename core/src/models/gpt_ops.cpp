#include "models/gpt_ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "models/ops.hpp"

namespace gossamer::models::gpt_ops {

namespace {

// erf and exp for GELU and softmax, written without calls into libm so that the compiler
// vectorizes the loops (std::erf and std::exp are scalar calls: with them GELU cost more than
// any matrix product of a step).
// erf: Eigen's rational approximation on [-4, 4] (erf(+-4) is +-1 in float), at most 4.2e-7 from
// the exact value; exp: Cody-Waite reduction and a degree-6 Taylor polynomial, relative error
// at most 2.4e-7 above e^-80 (both measured against libm's double versions on a grid of step 1e-4).
// Clamps with plain comparisons: std::min/max inside the AVX2 clones kept GCC 12 from
// vectorizing the loops.
[[gnu::always_inline]] inline float clamp(float x, float lo, float hi) {
    x = x < lo ? lo : x;
    return x > hi ? hi : x;
}

[[gnu::always_inline]] inline float erf_approx(float a) {
    const float x = clamp(a, -4.0f, 4.0f);
    const float x2 = x * x;
    float p = x2 * -2.72614225801306e-10f + 2.77068142495902e-08f;
    p = x2 * p + -2.10102402082508e-06f;
    p = x2 * p + -5.69250639462346e-05f;
    p = x2 * p + -7.34990630326855e-04f;
    p = x2 * p + -2.95459980854025e-03f;
    p = x2 * p + -1.60960333262415e-02f;
    float q = x2 * -1.45660718464996e-05f + -2.13374055278905e-04f;
    q = x2 * q + -1.68282697438203e-03f;
    q = x2 * q + -7.37332916720468e-03f;
    q = x2 * q + -1.42647390514189e-02f;
    return x * p / q;
}

[[gnu::always_inline]] inline float exp_approx(float a) {
    // Above -80 the result stays a normal float: denormals cost ~100x in every operation.
    const float x = clamp(a, -80.0f, 88.0f);
    const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round(x / ln 2)
    const float r = (x - n * 0.693145751953125f) - n * 1.42860682030941723e-6f;
    float p = 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const std::int32_t bits = (static_cast<std::int32_t>(n) + 127) << 23;  // 2^n
    float scale;
    std::memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

}  // namespace

// The loops below are written to vectorize (see CMakeLists.txt: -fno-trapping-math lets the
// compiler turn the clamps into min/max, -fopenmp-simd lets it split the sums); each public
// kernel is compiled twice, for AVX2 + FMA and for the baseline, and picked at load time.
#define GOSSAMER_KERNEL [[gnu::target_clones("arch=haswell", "default")]]

GOSSAMER_KERNEL void layernorm(const float* x, const float* gain, const float* bias, int rows,
                               int width, float* xhat, float* rstd, float* y) {
    const float inv_w = 1.0f / static_cast<float>(width);
    for (int r = 0; r < rows; ++r) {
        const std::size_t o = static_cast<std::size_t>(r) * width;
        const float* xr = x + o;
        float sum = 0;
#pragma omp simd reduction(+ : sum)
        for (int j = 0; j < width; ++j) sum += xr[j];
        const float mean = sum * inv_w;
        float var = 0;
#pragma omp simd reduction(+ : var)
        for (int j = 0; j < width; ++j) var += (xr[j] - mean) * (xr[j] - mean);
        const float rs = 1.0f / std::sqrt(var * inv_w + 1e-5f);
        rstd[r] = rs;
        float* hr = xhat + o;
        float* yr = y + o;
        for (int j = 0; j < width; ++j) {
            const float h = (xr[j] - mean) * rs;
            hr[j] = h;
            yr[j] = h * gain[j] + bias[j];
        }
    }
}

GOSSAMER_KERNEL void layernorm_backward(const float* dy, const float* xhat, const float* rstd,
                                        const float* gain, int rows, int width, float* dx,
                                        float* dgain, float* dbias) {
    if (dgain) std::fill_n(dgain, width, 0.0f);
    if (dbias) std::fill_n(dbias, width, 0.0f);
    const float inv_w = 1.0f / static_cast<float>(width);
    for (int r = 0; r < rows; ++r) {
        const std::size_t o = static_cast<std::size_t>(r) * width;
        const float* dyr = dy + o;
        const float* hr = xhat + o;
        if (dgain)
            for (int j = 0; j < width; ++j) dgain[j] += dyr[j] * hr[j];
        if (dbias)
            for (int j = 0; j < width; ++j) dbias[j] += dyr[j];
        if (!dx) continue;
        // dxhat = dy * gain; dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).
        float s1 = 0, s2 = 0;
#pragma omp simd reduction(+ : s1, s2)
        for (int j = 0; j < width; ++j) {
            const float d = dyr[j] * gain[j];
            s1 += d;
            s2 += d * hr[j];
        }
        s1 *= inv_w;
        s2 *= inv_w;
        const float rs = rstd[r];
        float* dxr = dx + o;
        for (int j = 0; j < width; ++j) dxr[j] += rs * (dyr[j] * gain[j] - s1 - hr[j] * s2);
    }
}

GOSSAMER_KERNEL void bias_gelu(float* f, const float* bias, int rows, int cols, float* g) {
    for (int r = 0; r < rows; ++r) {
        float* fr = f + static_cast<std::size_t>(r) * cols;
        float* gr = g + static_cast<std::size_t>(r) * cols;
        for (int j = 0; j < cols; ++j) {
            const float x = fr[j] + bias[j];
            fr[j] = x;
            gr[j] = x * (0.5f + 0.5f * erf_approx(x * kInvSqrt2));
        }
    }
}

// Phi is recomputed rather than kept from the forward pass: it is cheap now, and one buffer of
// 4 width floats per row less to write and read matters more (the loops are memory bound).
GOSSAMER_KERNEL void gelu_backward(float* d, const float* f, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        const float x = f[i];
        const float cdf = 0.5f + 0.5f * erf_approx(x * kInvSqrt2);
        // phi(x) for |x| <= 10; beyond, x phi(x) < 1e-21 and the bound keeps it from underflowing.
        const float x2 = x * x < 100.0f ? x * x : 100.0f;
        d[i] *= cdf + x * kInvSqrt2Pi * exp_approx(-0.5f * x2);
    }
}

namespace {

// Row i of a causal score matrix: softmax over columns 0..i, zeros after.
GOSSAMER_KERNEL void causal_softmax_row(float* row, int i, int t) {
    float m = row[0];
#pragma omp simd reduction(max : m)
    for (int j = 0; j <= i; ++j) m = row[j] > m ? row[j] : m;
    float sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j <= i; ++j) {
        const float e = exp_approx(row[j] - m);
        row[j] = e;
        sum += e;
    }
    const float inv = 1.0f / sum;
    for (int j = 0; j <= i; ++j) row[j] *= inv;
    std::fill(row + i + 1, row + t, 0.0f);
}

// dS = P * (dP - sum_j P dP) for row i (dP in ds, overwritten); zeros above the diagonal.
GOSSAMER_KERNEL void softmax_backward_row(float* ds, const float* p, int i, int t) {
    float dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int j = 0; j <= i; ++j) dot += p[j] * ds[j];
    for (int j = 0; j <= i; ++j) ds[j] = p[j] * (ds[j] - dot);
    std::fill(ds + i + 1, ds + t, 0.0f);
}

}  // namespace

void attention(const float* qkv, const AttentionShape& s, float* probs, float* out) {
    const int d = s.dim(), t = s.len, c = s.width, ld = 3 * c;
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    for (int b = 0; b < s.batch; ++b) {
        const float* base = qkv + static_cast<std::size_t>(b) * t * ld;
        for (int h = 0; h < s.heads; ++h) {
            const float* q = base + h * d;
            float* p = probs + (static_cast<std::size_t>(b) * s.heads + h) * t * t;
            ops::gemm(false, true, t, t, d, scale, q, ld, q + c, ld, 0.0f, p, t);
            for (int i = 0; i < t; ++i)
                causal_softmax_row(p + static_cast<std::size_t>(i) * t, i, t);
            ops::gemm(false, false, t, d, t, 1.0f, p, t, q + 2 * c, ld, 0.0f,
                      out + static_cast<std::size_t>(b) * t * c + h * d, c);
        }
    }
}

std::uint64_t attention_backward(const float* qkv, const float* probs, const float* dout,
                                 const AttentionShape& s, float* scratch, float* dqkv) {
    const int d = s.dim(), t = s.len, c = s.width, ld = 3 * c;
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    for (int b = 0; b < s.batch; ++b) {
        const std::size_t row0 = static_cast<std::size_t>(b) * t;
        const float* base = qkv + row0 * ld;
        float* dbase = dqkv + row0 * ld;
        for (int h = 0; h < s.heads; ++h) {
            const float* q = base + h * d;
            const float* p = probs + (static_cast<std::size_t>(b) * s.heads + h) * t * t;
            const float* dy = dout + row0 * c + h * d;
            float* dq = dbase + h * d;
            // dP = dY v^T, dv = P^T dY.
            ops::gemm(false, true, t, t, d, 1.0f, dy, c, q + 2 * c, ld, 0.0f, scratch, t);
            ops::gemm(true, false, t, d, t, 1.0f, p, t, dy, c, 0.0f, dq + 2 * c, ld);
            // dS = P * (dP - sum_j P dP) (zero above the diagonal, where P is zero).
            for (int i = 0; i < t; ++i) {
                const std::size_t o = static_cast<std::size_t>(i) * t;
                softmax_backward_row(scratch + o, p + o, i, t);
            }
            // dq = dS k / sqrt(d), dk = dS^T q / sqrt(d).
            ops::gemm(false, false, t, d, t, scale, scratch, t, q + c, ld, 0.0f, dq, ld);
            ops::gemm(true, false, t, d, t, scale, scratch, t, q, ld, 0.0f, dq + c, ld);
        }
    }
    return static_cast<std::uint64_t>(s.batch) * s.heads * 4 * t * t * d;
}

}  // namespace gossamer::models::gpt_ops
