// The GPT: a decoder-only, pre-LayerNorm transformer over characters (models.hpp fixes the
// layout, the init and the loss). Every matrix product is one GEMM over all samples * positions
// rows; attention runs per sequence and head on strided slices of the qkv rows. Activations the
// backward pass needs stay in per-block scratch buffers, kept between calls.

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "gossamer/core/models.hpp"
#include "gossamer/core/rng.hpp"
#include "models/gpt_ops.hpp"
#include "models/ops.hpp"

namespace gossamer::models {
namespace {

using u64 = std::uint64_t;

constexpr int kForwardRows = 4096;  // positions per chunk of a forward pass without gradient

// Offsets of one block's tensors from the block's start, in layout order.
struct BlockLayout {
    std::size_t ln1w, ln1b, qkvw, qkvb, projw, projb, ln2w, ln2b, fcw, fcb, fc2w, fc2b, size;
    explicit BlockLayout(std::size_t c) {
        std::size_t o = 0;
        auto take = [&o](std::size_t n) {
            const std::size_t at = o;
            o += n;
            return at;
        };
        ln1w = take(c), ln1b = take(c), qkvw = take(3 * c * c), qkvb = take(3 * c);
        projw = take(c * c), projb = take(c), ln2w = take(c), ln2b = take(c);
        fcw = take(4 * c * c), fcb = take(4 * c), fc2w = take(4 * c * c), fc2b = take(c);
        size = o;
    }
};

// What the backward pass keeps of one block's forward pass.
struct BlockActs {
    std::vector<float> xhat1, rstd1, h1, qkv, probs, att, xhat2, rstd2, h2, f, g;
};

void grow(std::vector<float>& v, std::size_t n) {
    if (v.size() < n) v.resize(n);
}

class Gpt final : public LanguageModel {
  public:
    explicit Gpt(GptSpec spec) : s_(std::move(spec)), block_(static_cast<std::size_t>(s_.width)) {
        if (s_.vocab < 2)
            throw Error(fmt::format("gpt: vocabulary of {}; need at least 2", s_.vocab));
        if (s_.context < 1 || s_.layers < 1 || s_.heads < 1 || s_.width < 1)
            throw Error(
                fmt::format("gpt: context {}, layers {}, heads {} and width {} must all be "
                            "positive",
                            s_.context, s_.layers, s_.heads, s_.width));
        if (s_.width % s_.heads != 0)
            throw Error(fmt::format("gpt: {} heads do not divide width {}", s_.heads, s_.width));
        const std::size_t c = s_.width, v = s_.vocab;
        std::size_t o = 0;
        layers_.push_back({"embed", o, (v + s_.context) * c});
        o += layers_.back().size;
        for (int l = 0; l < s_.layers; ++l) {
            layers_.push_back({fmt::format("block{}", l + 1), o, block_.size});
            o += block_.size;
        }
        layers_.push_back({"head", o, 2 * c + v * c + v});
        total_ = o + layers_.back().size;
        acts_.resize(s_.layers);
        macs_.assign(layers_.size(), 0);
    }

    std::string name() const override { return "gpt"; }
    std::string describe() const override {
        return fmt::format("gpt L{} H{} W{} T{} vocab {}{} ({} parameters)", s_.layers, s_.heads,
                           s_.width, s_.context, s_.vocab,
                           s_.digest.empty() ? std::string() : " #" + s_.digest, total_);
    }
    std::size_t parameter_count() const override { return total_; }
    std::span<const Layer> layers() const override { return layers_; }
    int input_features() const override { return s_.context + 1; }
    int classes() const override { return s_.vocab; }
    int context() const override { return s_.context; }
    int vocabulary_size() const override { return s_.vocab; }

    void init(std::span<float> params, u64 seed) const override {
        if (params.size() != total_)
            throw Error(fmt::format("gpt: init of {} floats, the model has {} parameters",
                                    params.size(), total_));
        const std::size_t c = s_.width, v = s_.vocab;
        const double proj_sd = 0.02 / std::sqrt(2.0 * s_.layers);
        // Layer l draws its weights, in layout order, from Rng(derive_seed(seed, l)).
        auto normal = [](Rng& rng, float* w, std::size_t n, double sd) {
            for (std::size_t i = 0; i < n; ++i) w[i] = static_cast<float>(rng.normal() * sd);
        };
        auto fill = [](float* w, std::size_t n, float value) { std::fill_n(w, n, value); };
        float* p = params.data();
        {
            Rng rng(derive_seed(seed, 0));
            normal(rng, p, (v + s_.context) * c, 0.02);
        }
        for (int l = 0; l < s_.layers; ++l) {
            Rng rng(derive_seed(seed, static_cast<u64>(l) + 1));
            float* b = p + layers_[l + 1].offset;
            const BlockLayout& k = block_;
            fill(b + k.ln1w, c, 1.0f), fill(b + k.ln1b, c, 0.0f);
            normal(rng, b + k.qkvw, 3 * c * c, 0.02), fill(b + k.qkvb, 3 * c, 0.0f);
            normal(rng, b + k.projw, c * c, proj_sd), fill(b + k.projb, c, 0.0f);
            fill(b + k.ln2w, c, 1.0f), fill(b + k.ln2b, c, 0.0f);
            normal(rng, b + k.fcw, 4 * c * c, 0.02), fill(b + k.fcb, 4 * c, 0.0f);
            normal(rng, b + k.fc2w, 4 * c * c, proj_sd), fill(b + k.fc2b, c, 0.0f);
        }
        Rng rng(derive_seed(seed, static_cast<u64>(s_.layers) + 1));
        float* h = p + layers_.back().offset;
        fill(h, c, 1.0f), fill(h + c, c, 0.0f);
        normal(rng, h + 2 * c, v * c, 0.02), fill(h + 2 * c + v * c, v, 0.0f);
    }

    double loss_and_gradient(std::span<const float> params, const Batch& batch,
                             std::span<float> grad, const LayerMask& need) override {
        const auto lowest = need.lowest(layers_.size());
        if (!lowest) return forward(params, batch).loss_sum / batch.size;
        check_batch(params, batch);
        check_gradient(grad);
        const double loss = forward_loss(params, batch, true).loss_sum;
        backward(params, grad, need, *lowest);
        return loss / batch.size;
    }

    // Without a backward pass nothing needs to be kept: the blocks share one set of buffers and
    // the batch goes through in chunks of about kForwardRows positions, which bounds the memory
    // of evaluate()'s large batches.
    BatchStats forward(std::span<const float> params, const Batch& batch) override {
        check_batch(params, batch);
        const int chunk = std::max(1, kForwardRows / s_.context);
        BatchStats total;
        for (int first = 0; first < batch.size; first += chunk) {
            Batch part = batch;
            part.size = std::min(chunk, batch.size - first);
            part.x += static_cast<std::size_t>(first) * batch.features;
            if (part.labels) part.labels += first;
            const BatchStats s = forward_loss(params, part, false);
            total.loss_sum += s.loss_sum;
            total.correct += s.correct;
        }
        return total;
    }

    void next_logits(std::span<const float> params, std::span<const std::int32_t> tokens,
                     std::span<float> logits) override {
        if (params.size() != total_)
            throw Error(
                fmt::format("gpt: {} parameters given, the model has {}", params.size(), total_));
        if (tokens.empty() || tokens.size() > static_cast<std::size_t>(s_.context))
            throw Error(fmt::format("gpt: next_logits of {} tokens; give 1 to {}", tokens.size(),
                                    s_.context));
        if (logits.size() != static_cast<std::size_t>(s_.vocab))
            throw Error(fmt::format("gpt: next_logits into {} floats; the vocabulary has {}",
                                    logits.size(), s_.vocab));
        for (std::size_t i = 0; i < tokens.size(); ++i)
            if (tokens[i] < 0 || tokens[i] >= s_.vocab)
                throw Error(fmt::format("gpt: token {} at position {} is outside [0, {})",
                                        tokens[i], i, s_.vocab));
        n_ = 1;
        len_ = static_cast<int>(tokens.size());
        ids_.assign(tokens.begin(), tokens.end());
        run_blocks(params, false);
        // The head on the last position only.
        const int c = s_.width;
        const float* h = params.data() + layers_.back().offset;
        const float* last = x_.data() + static_cast<std::size_t>(len_ - 1) * c;
        grow(hf_, c), grow(xhatf_, c), grow(rstdf_, 1);
        gpt_ops::layernorm(last, h, h + c, 1, c, xhatf_.data(), rstdf_.data(), hf_.data());
        const float* w = h + 2 * c;
        ops::gemm(false, true, 1, s_.vocab, c, 1.0f, hf_.data(), c, w, c, 0.0f, logits.data(),
                  s_.vocab);
        ops::add_bias(logits.data(), w + static_cast<std::size_t>(s_.vocab) * c, 1, s_.vocab);
    }

    std::span<const u64> backward_macs() const override { return macs_; }

    std::unique_ptr<Model> clone() const override { return std::make_unique<Gpt>(s_); }

  private:
    std::size_t rows() const { return static_cast<std::size_t>(n_) * len_; }

    // Reads the windows' token ids: inputs ids_[rows], targets tgt_[rows].
    void read_tokens(const Batch& batch) {
        n_ = batch.size;
        len_ = s_.context;
        ids_.resize(rows());
        tgt_.resize(rows());
        for (int b = 0; b < n_; ++b) {
            const float* w = batch.x + static_cast<std::size_t>(b) * (len_ + 1);
            for (int t = 0; t <= len_; ++t) {
                const float f = w[t];
                if (!(f >= 0.0f && f < static_cast<float>(s_.vocab)) || f != std::floor(f))
                    throw Error(
                        fmt::format("gpt: sample {} holds token {} at position {}; token "
                                    "ids are integers in [0, {})",
                                    b, f, t, s_.vocab));
                const auto id = static_cast<std::int32_t>(f);
                if (t < len_) ids_[static_cast<std::size_t>(b) * len_ + t] = id;
                if (t > 0) tgt_[static_cast<std::size_t>(b) * len_ + t - 1] = id;
            }
        }
    }

    // Embeddings and blocks on ids_ (n_ sequences of len_ tokens): leaves the residual stream
    // after the last block in x_. With `keep`, each block's activations stay for the backward
    // pass; otherwise all blocks use the first block's buffers.
    void run_blocks(std::span<const float> params, bool keep) {
        const std::size_t c = s_.width, r = rows();
        const float* wte = params.data();
        const float* wpe = wte + static_cast<std::size_t>(s_.vocab) * c;
        grow(x_, r * c);
        for (std::size_t i = 0; i < r; ++i) {
            const float* te = wte + static_cast<std::size_t>(ids_[i]) * c;
            const float* pe = wpe + (i % static_cast<std::size_t>(len_)) * c;
            float* xr = x_.data() + i * c;
            for (std::size_t j = 0; j < c; ++j) xr[j] = te[j] + pe[j];
        }
        const int R = static_cast<int>(r), C = s_.width;
        const gpt_ops::AttentionShape shape{n_, len_, s_.heads, C};
        for (int l = 0; l < s_.layers; ++l) {
            const float* b = params.data() + layers_[l + 1].offset;
            const BlockLayout& k = block_;
            BlockActs& a = acts_[keep ? l : 0];
            for (auto* v : {&a.xhat1, &a.h1, &a.att, &a.xhat2, &a.h2}) grow(*v, r * c);
            grow(a.rstd1, r), grow(a.rstd2, r), grow(a.qkv, 3 * r * c);
            for (auto* v : {&a.f, &a.g}) grow(*v, 4 * r * c);
            grow(a.probs, static_cast<std::size_t>(n_) * s_.heads * len_ * len_);
            gpt_ops::layernorm(x_.data(), b + k.ln1w, b + k.ln1b, R, C, a.xhat1.data(),
                               a.rstd1.data(), a.h1.data());
            ops::gemm(false, true, R, 3 * C, C, 1.0f, a.h1.data(), C, b + k.qkvw, C, 0.0f,
                      a.qkv.data(), 3 * C);
            ops::add_bias(a.qkv.data(), b + k.qkvb, R, 3 * C);
            gpt_ops::attention(a.qkv.data(), shape, a.probs.data(), a.att.data());
            // The residual adds: x += att proj^T + bias (beta = 1 accumulates into x).
            ops::gemm(false, true, R, C, C, 1.0f, a.att.data(), C, b + k.projw, C, 1.0f, x_.data(),
                      C);
            ops::add_bias(x_.data(), b + k.projb, R, C);
            gpt_ops::layernorm(x_.data(), b + k.ln2w, b + k.ln2b, R, C, a.xhat2.data(),
                               a.rstd2.data(), a.h2.data());
            ops::gemm(false, true, R, 4 * C, C, 1.0f, a.h2.data(), C, b + k.fcw, C, 0.0f,
                      a.f.data(), 4 * C);
            gpt_ops::bias_gelu(a.f.data(), b + k.fcb, R, 4 * C, a.g.data());
            ops::gemm(false, true, R, C, 4 * C, 1.0f, a.g.data(), 4 * C, b + k.fc2w, 4 * C, 1.0f,
                      x_.data(), C);
            ops::add_bias(x_.data(), b + k.fc2b, R, C);
        }
    }

    // The whole forward pass and the loss; with `grad`, logits_ holds d(mean loss)/d(logits).
    BatchStats forward_loss(std::span<const float> params, const Batch& batch, bool grad) {
        read_tokens(batch);
        run_blocks(params, grad);
        const int R = static_cast<int>(rows()), C = s_.width, V = s_.vocab;
        const float* h = params.data() + layers_.back().offset;
        grow(xhatf_, rows() * C), grow(rstdf_, rows()), grow(hf_, rows() * C);
        grow(logits_, rows() * V);
        gpt_ops::layernorm(x_.data(), h, h + C, R, C, xhatf_.data(), rstdf_.data(), hf_.data());
        const float* w = h + 2 * C;
        ops::gemm(false, true, R, V, C, 1.0f, hf_.data(), C, w, C, 0.0f, logits_.data(), V);
        ops::add_bias(logits_.data(), w + static_cast<std::size_t>(V) * C, R, V);
        // A sample is correct when its last position predicts the window's last token.
        std::int64_t correct = 0;
        for (int b = 0; b < n_; ++b) {
            const std::size_t row = static_cast<std::size_t>(b) * len_ + len_ - 1;
            const float* z = logits_.data() + row * V;
            correct += std::max_element(z, z + V) - z == tgt_[row] ? 1 : 0;
        }
        BatchStats s = ops::softmax_xent(logits_.data(), tgt_.data(), R, V, grad);
        s.loss_sum /= len_;  // per sample: the mean over its positions
        s.correct = correct;
        return s;
    }

    void backward(std::span<const float> params, std::span<float> grad, const LayerMask& need,
                  std::size_t lowest);

    GptSpec s_;
    BlockLayout block_;
    std::vector<Layer> layers_;
    std::size_t total_ = 0;
    std::vector<u64> macs_;
    // Scratch, reused across calls.
    int n_ = 0, len_ = 0;
    std::vector<std::int32_t> ids_, tgt_;
    std::vector<float> x_, xhatf_, rstdf_, hf_, logits_;
    std::vector<BlockActs> acts_;
    std::vector<float> dx_, dh_, dqkv_, dg_, dprobs_;
};

void Gpt::backward(std::span<const float> params, std::span<float> grad, const LayerMask& need,
                   std::size_t lowest) {
    const int R = static_cast<int>(rows()), C = s_.width, V = s_.vocab;
    const std::size_t r = rows(), c = C;
    const u64 rc = static_cast<u64>(R) * C;
    grow(dx_, r * c), grow(dh_, r * c), grow(dqkv_, 3 * r * c), grow(dg_, 4 * r * c);
    grow(dprobs_, static_cast<std::size_t>(len_) * len_);
    const std::size_t head = layers_.size() - 1;
    {
        const float* h = params.data() + layers_[head].offset;
        float* gh = grad.data() + layers_[head].offset;
        const float* w = h + 2 * c;
        float* gw = gh + 2 * c;
        // The head is always needed when we get here (it is the top layer).
        if (need.needs(head)) {
            ops::gemm(true, false, V, C, R, 1.0f, logits_.data(), V, hf_.data(), C, 0.0f, gw, C);
            ops::bias_grad(logits_.data(), R, V, gw + static_cast<std::size_t>(V) * c);
            macs_[head] += rc * V + static_cast<u64>(R) * V;
        }
        ops::gemm(false, false, R, C, V, 1.0f, logits_.data(), V, w, C, 0.0f, dh_.data(), C);
        macs_[head] += rc * V;
        std::fill_n(dx_.data(), r * c, 0.0f);
        const bool nh = need.needs(head);
        gpt_ops::layernorm_backward(dh_.data(), xhatf_.data(), rstdf_.data(), h, R, C,
                                    lowest < head ? dx_.data() : nullptr, nh ? gh : nullptr,
                                    nh ? gh + c : nullptr);
        if (lowest == head) return;
    }
    const gpt_ops::AttentionShape shape{n_, len_, s_.heads, C};
    for (std::size_t l = static_cast<std::size_t>(s_.layers); l >= 1 && l >= lowest; --l) {
        const float* b = params.data() + layers_[l].offset;
        float* gb = grad.data() + layers_[l].offset;
        const BlockLayout& k = block_;
        BlockActs& a = acts_[l - 1];
        const bool nd = need.needs(l), stop = l == lowest;
        u64& macs = macs_[l];
        // MLP: x_out = x_mid + gelu(h2 fc^T + fcb) fc2^T + fc2b.
        ops::gemm(false, false, R, 4 * C, C, 1.0f, dx_.data(), C, b + k.fc2w, 4 * C, 0.0f,
                  dg_.data(), 4 * C);
        macs += 4 * rc * C;
        if (nd) {
            ops::gemm(true, false, C, 4 * C, R, 1.0f, dx_.data(), C, a.g.data(), 4 * C, 0.0f,
                      gb + k.fc2w, 4 * C);
            ops::bias_grad(dx_.data(), R, C, gb + k.fc2b);
            macs += 4 * rc * C + rc;
        }
        gpt_ops::gelu_backward(dg_.data(), a.f.data(), 4 * r * c);
        ops::gemm(false, false, R, C, 4 * C, 1.0f, dg_.data(), 4 * C, b + k.fcw, C, 0.0f,
                  dh_.data(), C);
        macs += 4 * rc * C;
        if (nd) {
            ops::gemm(true, false, 4 * C, C, R, 1.0f, dg_.data(), 4 * C, a.h2.data(), C, 0.0f,
                      gb + k.fcw, C);
            ops::bias_grad(dg_.data(), R, 4 * C, gb + k.fcb);
            macs += 4 * rc * C + 4 * rc;
        }
        gpt_ops::layernorm_backward(dh_.data(), a.xhat2.data(), a.rstd2.data(), b + k.ln2w, R, C,
                                    dx_.data(), nd ? gb + k.ln2w : nullptr,
                                    nd ? gb + k.ln2b : nullptr);
        // Attention: x_mid = x_in + attention(ln1(x_in)) proj^T + projb.
        if (nd) {
            ops::gemm(true, false, C, C, R, 1.0f, dx_.data(), C, a.att.data(), C, 0.0f,
                      gb + k.projw, C);
            ops::bias_grad(dx_.data(), R, C, gb + k.projb);
            macs += rc * C + rc;
        }
        ops::gemm(false, false, R, C, C, 1.0f, dx_.data(), C, b + k.projw, C, 0.0f, dh_.data(), C);
        macs += rc * C;
        macs += gpt_ops::attention_backward(a.qkv.data(), a.probs.data(), dh_.data(), shape,
                                            dprobs_.data(), dqkv_.data());
        if (nd) {
            ops::gemm(true, false, 3 * C, C, R, 1.0f, dqkv_.data(), 3 * C, a.h1.data(), C, 0.0f,
                      gb + k.qkvw, C);
            ops::bias_grad(dqkv_.data(), R, 3 * C, gb + k.qkvb);
            macs += 3 * rc * C + 3 * rc;
        }
        ops::gemm(false, false, R, C, 3 * C, 1.0f, dqkv_.data(), 3 * C, b + k.qkvw, C, 0.0f,
                  dh_.data(), C);
        macs += 3 * rc * C;
        gpt_ops::layernorm_backward(dh_.data(), a.xhat1.data(), a.rstd1.data(), b + k.ln1w, R, C,
                                    stop ? nullptr : dx_.data(), nd ? gb + k.ln1w : nullptr,
                                    nd ? gb + k.ln1b : nullptr);
        if (stop) return;
    }
    if (lowest != 0) return;
    // Embeddings: x0 = wte[token] + wpe[position].
    float* gte = grad.data();
    float* gpe = gte + static_cast<std::size_t>(V) * c;
    std::fill_n(gte, (static_cast<std::size_t>(V) + s_.context) * c, 0.0f);
    for (std::size_t i = 0; i < r; ++i) {
        const float* d = dx_.data() + i * c;
        float* te = gte + static_cast<std::size_t>(ids_[i]) * c;
        float* pe = gpe + (i % static_cast<std::size_t>(len_)) * c;
        for (std::size_t j = 0; j < c; ++j) te[j] += d[j], pe[j] += d[j];
    }
    macs_[0] += 2 * rc;
}

}  // namespace

std::unique_ptr<LanguageModel> gpt(const GptSpec& spec) {
    return std::make_unique<Gpt>(spec);
}

}  // namespace gossamer::models
