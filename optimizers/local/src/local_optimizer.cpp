#include "gossamer/optimizers/local/local_optimizer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "gossamer/core/error.hpp"

namespace gossamer::optim {
namespace {

// torch.optim.SGD with dampening 0: g' = g + wd p; buf = mu buf + g' (buf starts at 0, so the
// first buf is g'); direction = g' + mu buf (Nesterov) or buf; p -= lr direction.
class Sgd final : public LocalOptimizer {
  public:
    Sgd(const OptimizerConfig& c, std::size_t size) : LocalOptimizer(c, size) {
        if (c.momentum > 0) buf_.assign(size, 0.0f);
    }

  private:
    void apply(std::span<float> p, std::span<const float> g, double lr, std::int64_t) override {
        const auto eta = static_cast<float>(lr);
        const auto wd = static_cast<float>(config().weight_decay);
        const auto mu = static_cast<float>(config().momentum);
        const std::size_t n = p.size();
        if (buf_.empty()) {
            for (std::size_t i = 0; i < n; ++i) p[i] -= eta * (g[i] + wd * p[i]);
        } else if (config().nesterov) {
            for (std::size_t i = 0; i < n; ++i) {
                const float gi = g[i] + wd * p[i];
                buf_[i] = mu * buf_[i] + gi;
                p[i] -= eta * (gi + mu * buf_[i]);
            }
        } else {
            for (std::size_t i = 0; i < n; ++i) {
                buf_[i] = mu * buf_[i] + (g[i] + wd * p[i]);
                p[i] -= eta * buf_[i];
            }
        }
    }
    void clear_state() override { std::fill(buf_.begin(), buf_.end(), 0.0f); }
    std::vector<std::vector<float>*> buffers() override { return {&buf_}; }

    std::vector<float> buf_;
};

// torch.optim.Adam / AdamW: m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
// Adam adds wd p to g (L2); AdamW first shrinks p by (1 - lr wd) and leaves g alone.
class Adam final : public LocalOptimizer {
  public:
    Adam(const OptimizerConfig& c, std::size_t size)
        : LocalOptimizer(c, size), m_(size, 0.0f), v_(size, 0.0f) {}

  private:
    void apply(std::span<float> p, std::span<const float> g, double lr, std::int64_t t) override {
        const auto& c = config();
        const double bc1 = 1.0 - std::pow(c.beta1, static_cast<double>(t));
        const double bc2 = 1.0 - std::pow(c.beta2, static_cast<double>(t));
        const auto step = static_cast<float>(lr / bc1);
        const auto inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
        const auto b1 = static_cast<float>(c.beta1), b2 = static_cast<float>(c.beta2);
        const auto eps = static_cast<float>(c.eps);
        const bool decoupled = c.kind == OptimizerKind::adamw;
        const auto l2 = decoupled ? 0.0f : static_cast<float>(c.weight_decay);
        const auto shrink = decoupled ? static_cast<float>(1.0 - lr * c.weight_decay) : 1.0f;
        for (std::size_t i = 0; i < p.size(); ++i) {
            const float gi = g[i] + l2 * p[i];
            m_[i] = b1 * m_[i] + (1.0f - b1) * gi;
            v_[i] = b2 * v_[i] + (1.0f - b2) * gi * gi;
            p[i] = p[i] * shrink - step * m_[i] / (std::sqrt(v_[i]) * inv_sqrt_bc2 + eps);
        }
    }
    void clear_state() override {
        std::fill(m_.begin(), m_.end(), 0.0f);
        std::fill(v_.begin(), v_.end(), 0.0f);
    }
    std::vector<std::vector<float>*> buffers() override { return {&m_, &v_}; }

    std::vector<float> m_, v_;
};

}  // namespace

std::string_view to_string(OptimizerKind kind) {
    switch (kind) {
        case OptimizerKind::sgd:
            return "sgd";
        case OptimizerKind::adam:
            return "adam";
        case OptimizerKind::adamw:
            return "adamw";
    }
    return "?";
}

void LocalOptimizer::step(std::span<float> params, std::span<const float> grads, double lr) {
    if (params.size() != size_ || grads.size() != size_)
        throw Error(
            fmt::format("{} optimizer for {} values was given {} parameters and {} "
                        "gradients",
                        to_string(config_.kind), size_, params.size(), grads.size()));
    if (!(lr >= 0) || !std::isfinite(lr))
        throw Error(fmt::format("{} optimizer: learning rate {} is not finite and >= 0",
                                to_string(config_.kind), lr));
    apply(params, grads, lr, ++steps_);
}

void LocalOptimizer::reset() {
    steps_ = 0;
    clear_state();
}

std::unique_ptr<LocalOptimizer> make_optimizer(const OptimizerConfig& config, std::size_t size) {
    validate(config);
    if (config.kind == OptimizerKind::sgd) return std::make_unique<Sgd>(config, size);
    return std::make_unique<Adam>(config, size);
}

}  // namespace gossamer::optim
