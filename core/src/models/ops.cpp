#include "models/ops.hpp"

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>

#include "gossamer/core/blas.hpp"
#include "gossamer/core/log.hpp"
#include "gossamer/core/rng.hpp"

namespace gossamer::models::ops {

void check_blas_once() {
    static std::once_flag once;
    std::call_once(once, [] {
        if (const char* better = better_blas_core())
            log::warn(
                "OpenBLAS uses its generic '{}' kernels on this CPU, which makes the models "
                "several times slower; set OPENBLAS_CORETYPE={} before starting",
                blas_core(), better);
    });
}

void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc) {
    check_blas_once();  // at the first product, after every config check has passed
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
                k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void add_bias(float* y, const float* bias, int rows, int cols) {
    for (int r = 0; r < rows; ++r) {
        float* row = y + static_cast<std::size_t>(r) * cols;
        for (int j = 0; j < cols; ++j) row[j] += bias[j];
    }
}

void bias_grad(const float* dy, int rows, int cols, float* db) {
    std::fill_n(db, cols, 0.0f);
    for (int r = 0; r < rows; ++r) {
        const float* row = dy + static_cast<std::size_t>(r) * cols;
        for (int j = 0; j < cols; ++j) db[j] += row[j];
    }
}

void relu(float* x, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void relu_backward(float* d, const float* y, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) d[i] = y[i] > 0.0f ? d[i] : 0.0f;
}

BatchStats softmax_xent(float* logits, const std::int32_t* labels, int rows, int classes,
                        bool grad) {
    BatchStats s;
    const float scale = 1.0f / static_cast<float>(rows);
    for (int r = 0; r < rows; ++r) {
        float* z = logits + static_cast<std::size_t>(r) * classes;
        const std::int32_t y = labels[r];
        if (y < 0 || y >= classes)
            throw Error(fmt::format("label {} of sample {} is outside [0, {})", y, r, classes));
        int best = 0;
        for (int j = 1; j < classes; ++j)
            if (z[j] > z[best]) best = j;
        const float m = z[best];
        // The loss in double: finite-difference checks and loss curves need more than float's
        // 7 digits once the loss is small.
        double sum = 0;
        for (int j = 0; j < classes; ++j) sum += std::exp(static_cast<double>(z[j] - m));
        s.loss_sum += std::log(sum) - static_cast<double>(z[y] - m);
        s.correct += best == y ? 1 : 0;
        if (grad) {
            const double inv = 1.0 / sum;
            for (int j = 0; j < classes; ++j)
                z[j] = static_cast<float>(std::exp(static_cast<double>(z[j] - m)) * inv) * scale;
            z[y] -= scale;
        }
    }
    return s;
}

BatchStats squared_error(float* y, const float* targets, int rows, bool grad) {
    BatchStats s;
    const float scale = 2.0f / static_cast<float>(rows);
    for (int r = 0; r < rows; ++r) {
        const double e = static_cast<double>(y[r]) - static_cast<double>(targets[r]);
        s.loss_sum += e * e;
        if (grad) y[r] = static_cast<float>(e) * scale;
    }
    return s;
}

// Both folds walk one kernel row (ki) at a time: where the source row exists, kernel columns
// [kj0, kj1) hit pixels inside the image and the rest hit the zero padding. With contiguous
// channels (NHWC, or a single channel) that middle part is one contiguous run of
// (kj1 - kj0) * c floats, which keeps these loops at memory speed.
namespace {

struct Span1 {
    int kj0, kj1;  // kernel columns that land inside the image
};

Span1 inside(int j, int k, int pad, int w) {
    return {std::max(0, pad - j), std::min(k, w + pad - j)};
}

}  // namespace

void im2col(const float* x, const Image& g, int k, float* cols) {
    const int pad = k / 2;
    const bool packed = g.c == 1 || (g.chan == 1 && g.col == static_cast<std::size_t>(g.c));
    const std::size_t kc = static_cast<std::size_t>(k) * g.c;
    float* out = cols;
    for (int n = 0; n < g.batch; ++n) {
        const float* xn = x + n * g.sample;
        for (int i = 0; i < g.h; ++i) {
            for (int j = 0; j < g.w; ++j) {
                const Span1 in = inside(j, k, pad, g.w);
                for (int ki = 0; ki < k; ++ki, out += kc) {
                    const int si = i + ki - pad;
                    if (si < 0 || si >= g.h) {
                        std::fill_n(out, kc, 0.0f);
                        continue;
                    }
                    std::fill_n(out, static_cast<std::size_t>(in.kj0) * g.c, 0.0f);
                    const float* src = xn + si * g.row + (j + in.kj0 - pad) * g.col;
                    float* dst = out + static_cast<std::size_t>(in.kj0) * g.c;
                    if (packed) {
                        // Short runs (one channel) are faster inline than through memcpy.
                        const std::size_t len = static_cast<std::size_t>(in.kj1 - in.kj0) * g.c;
                        if (len <= 16) {
                            for (std::size_t q = 0; q < len; ++q) dst[q] = src[q];
                        } else {
                            std::memcpy(dst, src, sizeof(float) * len);
                        }
                    } else {
                        for (int kj = in.kj0; kj < in.kj1; ++kj, src += g.col)
                            for (int ch = 0; ch < g.c; ++ch) *dst++ = src[ch * g.chan];
                    }
                    std::fill_n(out + static_cast<std::size_t>(in.kj1) * g.c,
                                static_cast<std::size_t>(k - in.kj1) * g.c, 0.0f);
                }
            }
        }
    }
}

void col2im(const float* dcols, const Image& g, int k, float* dx) {
    const int pad = k / 2;
    const bool packed = g.c == 1 || (g.chan == 1 && g.col == static_cast<std::size_t>(g.c));
    const std::size_t kc = static_cast<std::size_t>(k) * g.c;
    std::fill_n(dx, static_cast<std::size_t>(g.batch) * g.sample, 0.0f);
    const float* in_row = dcols;
    for (int n = 0; n < g.batch; ++n) {
        float* dxn = dx + n * g.sample;
        for (int i = 0; i < g.h; ++i) {
            for (int j = 0; j < g.w; ++j) {
                const Span1 in = inside(j, k, pad, g.w);
                for (int ki = 0; ki < k; ++ki, in_row += kc) {
                    const int si = i + ki - pad;
                    if (si < 0 || si >= g.h) continue;
                    float* dst = dxn + si * g.row + (j + in.kj0 - pad) * g.col;
                    const float* src = in_row + static_cast<std::size_t>(in.kj0) * g.c;
                    if (packed) {
                        const std::size_t len = static_cast<std::size_t>(in.kj1 - in.kj0) * g.c;
                        for (std::size_t q = 0; q < len; ++q) dst[q] += src[q];
                    } else {
                        for (int kj = in.kj0; kj < in.kj1; ++kj, dst += g.col)
                            for (int ch = 0; ch < g.c; ++ch) dst[ch * g.chan] += *src++;
                    }
                }
            }
        }
    }
}

void maxpool_forward(const float* x, int batch, int h, int w, int c, float* y,
                     std::int32_t* argmax) {
    const int oh = h / 2, ow = w / 2;
    if (static_cast<std::size_t>(batch) * h * w * c >
        static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
        throw Error("max-pooling input too large for 32-bit indices; use a smaller batch");
    for (int n = 0; n < batch; ++n) {
        for (int i = 0; i < oh; ++i) {
            for (int j = 0; j < ow; ++j) {
                const std::int32_t base = ((n * h + 2 * i) * w + 2 * j) * c;
                const std::int32_t offsets[4] = {0, c, w * c, w * c + c};
                float* out = y + ((static_cast<std::size_t>(n) * oh + i) * ow + j) * c;
                std::int32_t* arg = argmax + ((static_cast<std::size_t>(n) * oh + i) * ow + j) * c;
                for (int ch = 0; ch < c; ++ch) {
                    std::int32_t best = base + ch;
                    for (int q = 1; q < 4; ++q)
                        if (x[base + offsets[q] + ch] > x[best]) best = base + offsets[q] + ch;
                    out[ch] = x[best];
                    arg[ch] = best;
                }
            }
        }
    }
}

void maxpool_backward(const float* dy, const std::int32_t* argmax, std::size_t outputs, float* dx,
                      std::size_t inputs) {
    std::fill_n(dx, inputs, 0.0f);
    for (std::size_t o = 0; o < outputs; ++o) dx[argmax[o]] += dy[o];
}

void he_normal(std::span<float> w, int fan_in, std::uint64_t seed) {
    Rng rng(seed);
    const double sd = std::sqrt(2.0 / fan_in);
    for (float& v : w) v = static_cast<float>(rng.normal() * sd);
}

void glorot_uniform(std::span<float> w, int fan_in, int fan_out, std::uint64_t seed) {
    Rng rng(seed);
    const double a = std::sqrt(6.0 / (fan_in + fan_out));
    for (float& v : w) v = static_cast<float>((2.0 * rng.uniform() - 1.0) * a);
}

}  // namespace gossamer::models::ops
