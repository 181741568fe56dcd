#pragma once
/// A LocalWorker for protocol tests whose gradient is whatever the test says: a function of the
/// step number and the point. apply_gradient does plain SGD, x -= lr * g, and keeps a copy of
/// every g it was given, so a test can check exactly what a protocol applied.

#include <cstdint>
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "gossamer/optimizers/protocol/protocol.hpp"

namespace gossamer::testing {

class StandInWorker final : public proto::LocalWorker {
  public:
    /// Writes the gradient of step `step` at `at` into `g`.
    using GradientFn =
        std::function<void(std::int64_t step, std::span<const float> at, std::span<float> g)>;

    StandInWorker(std::vector<float> x0, GradientFn gradient, float lr = 1.0f)
        : x_(std::move(x0)), g_(x_.size()), gradient_(std::move(gradient)), lr_(lr) {}

    std::size_t size() const override { return x_.size(); }
    bool math() const override { return true; }
    std::span<float> params() override { return x_; }
    /// Returns 0.5 |g|^2 as the "loss".
    double compute_gradient(std::span<const float> at) override {
        gradient_(steps_, at, g_);
        double loss = 0;
        for (float v : g_) loss += 0.5 * double(v) * double(v);
        return loss;
    }
    std::span<const float> gradient() const override { return g_; }
    void apply_gradient(std::span<float> x, std::span<const float> g) override {
        applied_.emplace_back(g.begin(), g.end());
        for (std::size_t i = 0; i < x.size(); ++i) x[i] -= lr_ * g[i];
        ++steps_;
    }
    std::int64_t steps() const override { return steps_; }

    /// Every gradient apply_gradient received, in order.
    const std::vector<std::vector<float>>& applied() const { return applied_; }

  private:
    std::vector<float> x_, g_;
    GradientFn gradient_;
    float lr_;
    std::int64_t steps_ = 0;
    std::vector<std::vector<float>> applied_;
};

}  // namespace gossamer::testing
