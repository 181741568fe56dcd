#pragma once
// Dense kernels shared by the built-in models (private to core). Matrices are row-major float32;
// all GEMM work goes through CBLAS so that it runs at OpenBLAS speed.

#include <cstddef>
#include <cstdint>
#include <span>

#include "gossamer/core/model.hpp"

namespace gossamer::models::ops {

/// Logs a warning, once per process, when OpenBLAS runs its generic kernels on a CPU with AVX2
/// (OpenBLAS 0.3.21 does not recognise some recent Xeons and falls back to "Prescott", about 4x
/// slower); the warning names the OPENBLAS_CORETYPE setting that fixes it.
void check_blas_once();

/// C[m x n] = alpha * op(A) * op(B) + beta * C, op = transpose when ta / tb.
void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc);

/// y[r, :] += bias for every row of y[rows x cols].
void add_bias(float* y, const float* bias, int rows, int cols);
/// db = column sums of dy[rows x cols] (overwrites db).
void bias_grad(const float* dy, int rows, int cols, float* db);

/// x = max(x, 0).
void relu(float* x, std::size_t n);
/// d = d where y > 0, else 0 (y is the ReLU output).
void relu_backward(float* d, const float* y, std::size_t n);

/// Softmax cross-entropy over the rows of logits[rows x classes]. Returns the summed loss
/// (accumulated in double) and the number of rows whose arg-max equals the label. When `grad`,
/// overwrites the logits with d(mean loss)/d(logits) = (softmax - onehot) / rows. Throws Error for
/// a label outside [0, classes).
BatchStats softmax_xent(float* logits, const std::int32_t* labels, int rows, int classes,
                        bool grad);
/// Squared error (y - t)^2 summed over rows of y[rows]; when `grad`, overwrites y with
/// d(mean loss)/dy = 2 (y - t) / rows.
BatchStats squared_error(float* y, const float* targets, int rows, bool grad);

/// Image geometry for im2col: `batch` samples of h x w pixels with c channels, read at
/// x[n * sample + i * row + j * col + ch * chan] (lets the first layer read CHW input).
struct Image {
    int batch, h, w, c;
    std::size_t sample, row, col, chan;
};

/// Unfolds k x k patches ('same' zero padding of k / 2, stride 1) into
/// cols[(n*h + i)*w + j][(ki*k + kj)*c + ch].
void im2col(const float* x, const Image& g, int k, float* cols);
/// The adjoint of im2col for NHWC input: dx (zeroed here) += folded dcols.
void col2im(const float* dcols, const Image& g, int k, float* dx);

/// 2x2 max-pooling, stride 2, NHWC, floor (an odd last row or column is dropped). Writes
/// y[batch, h/2, w/2, c] and, per output, the index into x of the maximum.
void maxpool_forward(const float* x, int batch, int h, int w, int c, float* y,
                     std::int32_t* argmax);
/// dx (x's shape, zeroed here) gets dy routed to the arg-max positions.
void maxpool_backward(const float* dy, const std::int32_t* argmax, std::size_t outputs, float* dx,
                      std::size_t inputs);

/// N(0, 2 / fan_in) weights (He et al. 2015, for layers followed by a ReLU).
void he_normal(std::span<float> w, int fan_in, std::uint64_t seed);
/// U(-a, a), a = sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio 2010, for the output layer).
void glorot_uniform(std::span<float> w, int fan_in, int fan_out, std::uint64_t seed);

}  // namespace gossamer::models::ops
