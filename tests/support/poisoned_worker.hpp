#pragma once
// A LocalWorker for the non-finite tests (docs/operations/reliability.md): x_r moves towards its
// own target r + 1 with gradient x - target and loss 0.5 |x - target|^2; `poison(rank, step, g)`
// may write into the gradient of a step after its loss was computed (an overflow in a backward
// pass, or a user loop that hands over a NaN update): the loss stays finite, the model does not.

#include <cstdint>
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "gossamer/optimizers/protocol/protocol.hpp"

namespace gossamer::test {

using Poison = std::function<void(int rank, std::int64_t step, std::span<float> g)>;

class PoisonedWorker final : public proto::LocalWorker {
  public:
    PoisonedWorker(int rank, Poison poison, std::size_t size = 16)
        : rank_(rank), x_(size, 0.0f), g_(size), poison_(std::move(poison)) {}
    std::size_t size() const override { return x_.size(); }
    bool math() const override { return true; }
    std::span<float> params() override { return x_; }
    double compute_gradient(std::span<const float> at) override {
        double loss = 0;
        for (std::size_t k = 0; k < x_.size(); ++k) {
            g_[k] = at[k] - static_cast<float>(rank_ + 1);
            loss += 0.5 * double(g_[k]) * double(g_[k]);
        }
        if (poison_) poison_(rank_, steps_, g_);
        return loss;
    }
    std::span<const float> gradient() const override { return g_; }
    void apply_gradient(std::span<float> x, std::span<const float> g) override {
        for (std::size_t k = 0; k < x.size(); ++k) x[k] -= 0.1f * g[k];
        ++steps_;
    }
    std::int64_t steps() const override { return steps_; }

  private:
    int rank_;
    std::vector<float> x_, g_;
    Poison poison_;
    std::int64_t steps_ = 0;
};

}  // namespace gossamer::test
