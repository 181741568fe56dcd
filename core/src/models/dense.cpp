// Fully connected models: softmax regression, linear regression and the MLP are one class with
// different sizes and heads, so they share one tested forward/backward pass.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <vector>

#include "gossamer/core/models.hpp"
#include "gossamer/core/rng.hpp"
#include "models/ops.hpp"

namespace gossamer::models {
namespace {

enum class Head { softmax_xent, squared_error };

class Dense final : public Model {
  public:
    Dense(std::string name, std::vector<int> sizes, Head head)
        : name_(std::move(name)), sizes_(std::move(sizes)), head_(head) {
        for (std::size_t i = 0; i < sizes_.size(); ++i)
            if (sizes_[i] < 1)
                throw Error(fmt::format("{}: layer size {} at position {} must be positive", name_,
                                        sizes_[i], i));
        const std::size_t count = sizes_.size() - 1;
        std::size_t offset = 0;
        for (std::size_t l = 0; l < count; ++l) {
            const std::size_t size =
                static_cast<std::size_t>(sizes_[l] + 1) * static_cast<std::size_t>(sizes_[l + 1]);
            layers_.push_back(
                {count == 1 ? std::string("fc") : fmt::format("fc{}", l + 1), offset, size});
            offset += size;
        }
        total_ = offset;
        acts_.resize(count + 1);
        macs_.assign(count, 0);
    }

    std::string name() const override { return name_; }
    std::string describe() const override {
        return fmt::format("{} {} ({} parameters)", name_, fmt::join(sizes_, "-"), total_);
    }
    std::size_t parameter_count() const override { return total_; }
    std::span<const Layer> layers() const override { return layers_; }
    int input_features() const override { return sizes_.front(); }
    int classes() const override { return head_ == Head::softmax_xent ? sizes_.back() : 0; }

    void init(std::span<float> params, std::uint64_t seed) const override {
        if (params.size() != total_)
            throw Error(fmt::format("{}: init of {} floats, the model has {} parameters", name_,
                                    params.size(), total_));
        for (std::size_t l = 0; l < layers_.size(); ++l) {
            auto w = params.subspan(layers_[l].offset, weights(l));
            const std::uint64_t s = derive_seed(seed, l);
            if (l + 1 < layers_.size())
                ops::he_normal(w, sizes_[l], s);
            else
                ops::glorot_uniform(w, sizes_[l], sizes_[l + 1], s);
            std::fill_n(params.begin() + static_cast<std::ptrdiff_t>(layers_[l].offset + w.size()),
                        sizes_[l + 1], 0.0f);
        }
    }

    double loss_and_gradient(std::span<const float> params, const Batch& batch,
                             std::span<float> grad, const LayerMask& need) override {
        check_batch(params, batch);
        const auto lowest = need.lowest(layers_.size());
        if (lowest) check_gradient(grad);
        const int n = batch.size;
        float* out = run_forward(params, batch);
        const BatchStats stats = head(out, batch, true);
        if (!lowest) return stats.loss_sum / n;
        // delta_ holds dLoss/d(pre-activation) of layer l, spare_ receives that of layer l - 1.
        float* delta = out;
        for (std::size_t l = layers_.size(); l-- > *lowest;) {
            const int in = sizes_[l], outs = sizes_[l + 1];
            const float* x = l == 0 ? batch.x : acts_[l].data();
            const float* w = params.data() + layers_[l].offset;
            if (need.needs(l)) {
                float* gw = grad.data() + layers_[l].offset;
                ops::gemm(true, false, outs, in, n, 1.0f, delta, outs, x, in, 0.0f, gw, in);
                ops::bias_grad(delta, n, outs, gw + weights(l));
                macs_[l] += static_cast<std::uint64_t>(n) * outs * (in + 1);
            }
            if (l == *lowest) break;
            macs_[l] += static_cast<std::uint64_t>(n) * in * outs;
            spare_.resize(static_cast<std::size_t>(n) * in);
            ops::gemm(false, false, n, in, outs, 1.0f, delta, outs, w, in, 0.0f, spare_.data(), in);
            ops::relu_backward(spare_.data(), acts_[l].data(), spare_.size());
            // The activation buffer of layer l is no longer needed: reuse it for the delta.
            std::swap(acts_[l], spare_);
            delta = acts_[l].data();
        }
        return stats.loss_sum / n;
    }

    BatchStats forward(std::span<const float> params, const Batch& batch) override {
        check_batch(params, batch);
        return head(run_forward(params, batch), batch, false);
    }

    std::span<const std::uint64_t> backward_macs() const override { return macs_; }

    std::unique_ptr<Model> clone() const override {
        return std::make_unique<Dense>(name_, sizes_, head_);
    }

  private:
    std::size_t weights(std::size_t l) const {
        return static_cast<std::size_t>(sizes_[l]) * static_cast<std::size_t>(sizes_[l + 1]);
    }

    // acts_[l + 1] = layer l's output (after ReLU for hidden layers); returns the output layer's.
    float* run_forward(std::span<const float> params, const Batch& batch) {
        const int n = batch.size;
        for (std::size_t l = 0; l < layers_.size(); ++l) {
            const int in = sizes_[l], outs = sizes_[l + 1];
            const float* x = l == 0 ? batch.x : acts_[l].data();
            const float* w = params.data() + layers_[l].offset;
            auto& y = acts_[l + 1];
            y.resize(static_cast<std::size_t>(n) * outs);
            ops::gemm(false, true, n, outs, in, 1.0f, x, in, w, in, 0.0f, y.data(), outs);
            ops::add_bias(y.data(), w + weights(l), n, outs);
            if (l + 1 < layers_.size()) ops::relu(y.data(), y.size());
        }
        return acts_.back().data();
    }

    BatchStats head(float* out, const Batch& batch, bool grad) const {
        if (head_ == Head::softmax_xent)
            return ops::softmax_xent(out, batch.labels, batch.size, sizes_.back(), grad);
        return ops::squared_error(out, batch.targets, batch.size, grad);
    }

    std::string name_;
    std::vector<int> sizes_;  // input, hidden..., output
    Head head_;
    std::vector<Layer> layers_;
    std::size_t total_ = 0;
    std::vector<std::vector<float>> acts_;  // scratch, reused across calls
    std::vector<float> spare_;
    std::vector<std::uint64_t> macs_;  // backward multiply-adds per layer
};

}  // namespace

std::unique_ptr<Model> softmax_regression(int features, int classes) {
    if (classes < 2) throw Error(fmt::format("softmax: {} classes; need at least 2", classes));
    return std::make_unique<Dense>("softmax", std::vector<int>{features, classes},
                                   Head::softmax_xent);
}

std::unique_ptr<Model> linear_regression(int features) {
    return std::make_unique<Dense>("linear", std::vector<int>{features, 1}, Head::squared_error);
}

std::unique_ptr<Model> mlp(int features, const std::vector<int>& hidden, int classes) {
    if (classes < 2) throw Error(fmt::format("mlp: {} classes; need at least 2", classes));
    std::vector<int> sizes{features};
    sizes.insert(sizes.end(), hidden.begin(), hidden.end());
    sizes.push_back(classes);
    return std::make_unique<Dense>("mlp", std::move(sizes), Head::softmax_xent);
}

}  // namespace gossamer::models
