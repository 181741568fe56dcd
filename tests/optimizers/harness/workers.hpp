#pragma once
/// Workers for protocol tests (harness.hpp):
///  - StandInWorker: the gradient is whatever the test says; keeps every gradient it applied;
///  - QuadraticWorker: f(x) = a/2 |x - b|^2 with plain SGD, the gradient known exactly;
///  - RecordingWorker: records the point of every gradient another worker computes;
///  - GuardedWorker: a layer around any worker that owns its gradient buffer, so that a test can
///    poison it while a step runs (a protocol that reads the gradient then reads NaN).

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "gossamer/core/rng.hpp"
#include "gossamer/optimizers/protocol/protocol.hpp"

namespace gossamer::testing {

/// A worker whose gradient is a function of the step number and the point. apply_gradient does
/// plain SGD, x -= lr * g, and keeps a copy of every g it was given, so a test can check exactly
/// what a protocol applied.
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

/// f(x) = a/2 |x - b|^2 with plain SGD at rate lr: the gradient a (x - b) is known exactly, and
/// a = 0 gives a consensus-only run. Checkpointable (x and the step count).
class QuadraticWorker final : public proto::LocalWorker {
  public:
    QuadraticWorker(std::vector<float> x0, double a = 0.0, std::vector<float> b = {},
                    double lr = 0.1)
        : x_(std::move(x0)), b_(std::move(b)), g_(x_.size()), a_(a), lr_(lr) {
        if (b_.empty()) b_.assign(x_.size(), 0.0f);
    }
    std::size_t size() const override { return x_.size(); }
    bool math() const override { return true; }
    std::span<float> params() override { return x_; }
    double compute_gradient(std::span<const float> at) override {
        double loss = 0;
        for (std::size_t k = 0; k < x_.size(); ++k) {
            const double d = at[k] - b_[k];
            g_[k] = static_cast<float>(a_ * d);
            loss += 0.5 * a_ * d * d;
        }
        return loss;
    }
    std::span<const float> gradient() const override { return g_; }
    void apply_gradient(std::span<float> x, std::span<const float> g) override {
        for (std::size_t k = 0; k < x.size(); ++k) x[k] -= static_cast<float>(lr_ * g[k]);
        ++steps_;
    }
    std::int64_t steps() const override { return steps_; }
    const std::vector<float>& target() const { return b_; }
    bool checkpointable() const override { return true; }
    void save_state(StateWriter& w) const override {
        w.i64(steps_);
        w.floats(x_);
    }
    void restore_state(StateReader& r) override {
        steps_ = r.i64("worker steps");
        r.floats_into("worker x", x_);
    }
    void enter_at(std::int64_t step) override { steps_ = step; }

  private:
    std::vector<float> x_, b_, g_;
    double a_, lr_;
    std::int64_t steps_ = 0;
};

/// Values uniform in [-1, 1), from the seed.
inline std::vector<float> random_vector(std::size_t d, std::uint64_t seed) {
    Rng rng(seed);
    std::vector<float> v(d);
    for (auto& e : v) e = static_cast<float>(2.0 * rng.uniform() - 1.0);
    return v;
}

/// A worker that records the point of every gradient it computes: a synchronous protocol's
/// model at the start of each step, for loss-per-round curves.
class RecordingWorker final : public proto::LocalWorker {
  public:
    explicit RecordingWorker(std::unique_ptr<proto::LocalWorker> inner)
        : inner_(std::move(inner)) {}
    std::size_t size() const override { return inner_->size(); }
    bool math() const override { return inner_->math(); }
    std::span<float> params() override { return inner_->params(); }
    double compute_gradient(std::span<const float> at) override {
        points.emplace_back(at.begin(), at.end());
        return inner_->compute_gradient(at);
    }
    std::span<const float> gradient() const override { return inner_->gradient(); }
    void apply_gradient(std::span<float> x, std::span<const float> g) override {
        inner_->apply_gradient(x, g);
    }
    std::int64_t steps() const override { return inner_->steps(); }

    std::vector<std::vector<float>> points;  ///< by step

  private:
    std::unique_ptr<proto::LocalWorker> inner_;
};

/// A layer around a host worker that keeps its own copy of the gradient: poison() fills it with
/// NaN (call it when a step starts: the compute side owns the buffer until step_finished), and
/// compute_gradient() writes the inner worker's gradient into it. Everything else is the inner
/// worker's, so a protocol that follows the ownership rule computes the very same bits.
class GuardedWorker final : public proto::LocalWorker {
  public:
    explicit GuardedWorker(std::unique_ptr<proto::LocalWorker> inner)
        : inner_(std::move(inner)), g_(inner_->size()) {}
    void poison() { std::fill(g_.begin(), g_.end(), std::numeric_limits<float>::quiet_NaN()); }

    std::size_t size() const override { return inner_->size(); }
    bool math() const override { return inner_->math(); }
    std::span<float> params() override { return inner_->params(); }
    double compute_gradient(std::span<const float> at) override {
        const double loss = inner_->compute_gradient(at);
        const auto g = inner_->gradient();
        std::copy(g.begin(), g.end(), g_.begin());
        return loss;
    }
    std::span<const float> gradient() const override {
        return math() ? std::span<const float>(g_) : std::span<const float>();
    }
    void apply_gradient(std::span<float> x, std::span<const float> g) override {
        inner_->apply_gradient(x, g);
    }
    std::int64_t steps() const override { return inner_->steps(); }
    const optim::Multirate* multirate() const override { return inner_->multirate(); }
    std::span<const proto::PartitionWork> work() const override { return inner_->work(); }
    const PartitionLayout* partitions() const override { return inner_->partitions(); }
    bool step_partition(std::size_t id, std::span<float> x, std::span<const float> g) override {
        return inner_->step_partition(id, x, g);
    }
    bool checkpointable() const override { return inner_->checkpointable(); }
    void save_state(StateWriter& w) const override { inner_->save_state(w); }
    void restore_state(StateReader& r) override { inner_->restore_state(r); }
    void enter_at(std::int64_t step) override { inner_->enter_at(step); }

  private:
    std::unique_ptr<proto::LocalWorker> inner_;
    std::vector<float> g_;
};

}  // namespace gossamer::testing
