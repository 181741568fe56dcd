#include "models/gpt_ops.hpp"

#include <algorithm>
#include <cmath>

#include "models/ops.hpp"

namespace gossamer::models::gpt_ops {

void layernorm(const float* x, const float* gain, const float* bias, int rows, int width,
               float* xhat, float* rstd, float* y) {
    const float inv_w = 1.0f / static_cast<float>(width);
    for (int r = 0; r < rows; ++r) {
        const std::size_t o = static_cast<std::size_t>(r) * width;
        const float* xr = x + o;
        float sum = 0;
        for (int j = 0; j < width; ++j) sum += xr[j];
        const float mean = sum * inv_w;
        float var = 0;
        for (int j = 0; j < width; ++j) {
            const float c = xr[j] - mean;
            var += c * c;
        }
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

void layernorm_backward(const float* dy, const float* xhat, const float* rstd, const float* gain,
                        int rows, int width, float* dx, float* dgain, float* dbias) {
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

void gelu(const float* f, float* cdf, float* g, std::size_t n) {
    constexpr float kInvSqrt2 = 0.70710678118654752f;
    for (std::size_t i = 0; i < n; ++i) {
        const float c = 0.5f * (1.0f + std::erf(f[i] * kInvSqrt2));
        cdf[i] = c;
        g[i] = f[i] * c;
    }
}

void gelu_backward(float* d, const float* f, const float* cdf, std::size_t n) {
    constexpr float kInvSqrt2Pi = 0.39894228040143268f;
    for (std::size_t i = 0; i < n; ++i) {
        const float x = f[i];
        d[i] *= cdf[i] + x * kInvSqrt2Pi * std::exp(-0.5f * x * x);
    }
}

void attention(const float* qkv, const AttentionShape& s, float* probs, float* out) {
    const int d = s.dim(), t = s.len, c = s.width, ld = 3 * c;
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    for (int b = 0; b < s.batch; ++b) {
        const float* base = qkv + static_cast<std::size_t>(b) * t * ld;
        for (int h = 0; h < s.heads; ++h) {
            const float* q = base + h * d;
            float* p = probs + (static_cast<std::size_t>(b) * s.heads + h) * t * t;
            ops::gemm(false, true, t, t, d, scale, q, ld, q + c, ld, 0.0f, p, t);
            for (int i = 0; i < t; ++i) {
                float* row = p + static_cast<std::size_t>(i) * t;
                float m = row[0];
                for (int j = 1; j <= i; ++j) m = std::max(m, row[j]);
                float sum = 0;
                for (int j = 0; j <= i; ++j) {
                    row[j] = std::exp(row[j] - m);
                    sum += row[j];
                }
                const float inv = 1.0f / sum;
                for (int j = 0; j <= i; ++j) row[j] *= inv;
                std::fill(row + i + 1, row + t, 0.0f);
            }
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
                float* ds = scratch + static_cast<std::size_t>(i) * t;
                const float* pr = p + static_cast<std::size_t>(i) * t;
                float dot = 0;
                for (int j = 0; j <= i; ++j) dot += pr[j] * ds[j];
                for (int j = 0; j <= i; ++j) ds[j] = pr[j] * (ds[j] - dot);
                std::fill(ds + i + 1, ds + t, 0.0f);
            }
            // dq = dS k / sqrt(d), dk = dS^T q / sqrt(d).
            ops::gemm(false, false, t, d, t, scale, scratch, t, q + c, ld, 0.0f, dq, ld);
            ops::gemm(true, false, t, d, t, scale, scratch, t, q, ld, 0.0f, dq + c, ld);
        }
    }
    return static_cast<std::uint64_t>(s.batch) * s.heads * 4 * t * t * d;
}

}  // namespace gossamer::models::gpt_ops
