#pragma once
// Kernels of the GPT (private to core): LayerNorm, GELU and causal self-attention, forward and
// backward, on row-major float32 activations of `rows` = samples * positions rows.

#include <cstddef>
#include <cstdint>

namespace gossamer::models::gpt_ops {

/// LayerNorm over each row of x[rows x width] (eps 1e-5): xhat = (x - mean) * rstd,
/// y = xhat * gain + bias. Keeps xhat and rstd[rows] for the backward pass.
void layernorm(const float* x, const float* gain, const float* bias, int rows, int width,
               float* xhat, float* rstd, float* y);

/// The backward pass of layernorm for dy. Overwrites dgain and dbias (when not null) with their
/// gradients; adds the input's gradient to dx (when not null: the residual stream's gradient).
void layernorm_backward(const float* dy, const float* xhat, const float* rstd, const float* gain,
                        int rows, int width, float* dx, float* dgain, float* dbias);

/// Adds bias[cols] to every row of f[rows x cols] (the pre-activation, kept for the backward
/// pass), then g = GELU(f) = f * Phi(f), exact erf form (erf to within 5e-7).
void bias_gelu(float* f, const float* bias, int rows, int cols, float* g);

/// d = d * GELU'(f), GELU'(f) = Phi(f) + f * phi(f), in place.
void gelu_backward(float* d, const float* f, std::size_t n);

/// The shape of one attention call: `batch` sequences of `len` positions, `heads` heads of
/// width / heads dimensions. qkv rows are [q | k | v] (3 width floats), out rows width floats.
struct AttentionShape {
    int batch, len, heads, width;
    int dim() const { return width / heads; }
};

/// Causal multi-head attention: per sequence and head, probs = softmax(q k^T / sqrt(d)) over
/// positions <= i (zeros above the diagonal), out = probs v. probs holds batch * heads blocks of
/// len x len floats, kept for the backward pass.
void attention(const float* qkv, const AttentionShape& s, float* probs, float* out);

/// The backward pass of attention for dout: overwrites dqkv[rows x 3 width]. `scratch` holds
/// len x len floats. Returns the multiply-adds of its products.
std::uint64_t attention_backward(const float* qkv, const float* probs, const float* dout,
                                 const AttentionShape& s, float* scratch, float* dqkv);

}  // namespace gossamer::models::gpt_ops
