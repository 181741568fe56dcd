#pragma once
// Stand-in workers and a few helpers shared by the gossip tests: N protocols of one kind over a
// schedule, their models, averages and disagreement.

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "gossamer/core/json.hpp"
#include "gossamer/core/rng.hpp"
#include "gossamer/optimizers/protocol/protocol.hpp"
#include "gossamer/topology/schedule.hpp"
#include "harness.hpp"

namespace gossip_test {

using gossamer::proto::PeerContext;

/// f(x) = a/2 |x - b|^2 with plain SGD at rate lr: the gradient a (x - b) is known exactly, and
/// a = 0 gives a consensus-only run.
class QuadraticWorker final : public LocalWorker {
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

  private:
    std::vector<float> x_, b_, g_;
    double a_, lr_;
    std::int64_t steps_ = 0;
};

/// Values uniform in [-1, 1), from (seed, rank).
inline std::vector<float> random_vector(std::size_t d, std::uint64_t seed) {
    gossamer::Rng rng(seed);
    std::vector<float> v(d);
    for (auto& e : v) e = static_cast<float>(2.0 * rng.uniform() - 1.0);
    return v;
}

using Factory = std::function<std::unique_ptr<Protocol>(const gossamer::json::Node*, PeerContext)>;

/// N peers of one protocol, each over its own worker.
struct Network {
    std::vector<std::unique_ptr<LocalWorker>> workers;
    std::vector<std::unique_ptr<Protocol>> peers;

    int n() const { return static_cast<int>(peers.size()); }
    std::vector<Protocol*> protocols() const {
        std::vector<Protocol*> v;
        for (const auto& p : peers) v.push_back(p.get());
        return v;
    }
    std::vector<LocalWorker*> locals() const {
        std::vector<LocalWorker*> v;
        for (const auto& w : workers) v.push_back(w.get());
        return v;
    }
    template <typename P>
    P& at(int i) const {
        return dynamic_cast<P&>(*peers[static_cast<std::size_t>(i)]);
    }
    /// The models peers report (current_model), as doubles.
    std::vector<std::vector<double>> models(const std::vector<bool>& only = {}) const {
        std::vector<std::vector<double>> out;
        for (int i = 0; i < n(); ++i) {
            if (!only.empty() && !only[static_cast<std::size_t>(i)]) continue;
            std::vector<float> m(workers[static_cast<std::size_t>(i)]->size());
            peers[static_cast<std::size_t>(i)]->current_model(m);
            out.emplace_back(m.begin(), m.end());
        }
        return out;
    }
    Harness harness(HarnessOptions options = {}) const {
        return Harness(protocols(), locals(), options);
    }
};

/// Builds n peers over `schedule` with workers from make_worker(rank).
inline Network make_network(std::shared_ptr<const gossamer::topology::Schedule> schedule,
                            std::int64_t max_steps, const Factory& factory,
                            const gossamer::json::Node* options,
                            const std::function<std::unique_ptr<LocalWorker>(int)>& make_worker) {
    Network net;
    const int n = schedule->n();
    for (int i = 0; i < n; ++i) {
        net.workers.push_back(make_worker(i));
        PeerContext ctx{i, n, schedule, net.workers.back().get(), max_steps};
        net.peers.push_back(factory(options, ctx));
    }
    return net;
}

inline std::vector<double> mean_of(const std::vector<std::vector<double>>& xs) {
    std::vector<double> m(xs.front().size(), 0.0);
    for (const auto& x : xs)
        for (std::size_t k = 0; k < m.size(); ++k) m[k] += x[k] / static_cast<double>(xs.size());
    return m;
}

/// sqrt(sum_i |x_i - mean|^2).
inline double disagreement(const std::vector<std::vector<double>>& xs) {
    const auto m = mean_of(xs);
    double s = 0;
    for (const auto& x : xs)
        for (std::size_t k = 0; k < m.size(); ++k) s += (x[k] - m[k]) * (x[k] - m[k]);
    return std::sqrt(s);
}

inline double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
    double d = 0;
    for (std::size_t k = 0; k < a.size(); ++k) d = std::max(d, std::abs(a[k] - b[k]));
    return d;
}

}  // namespace gossip_test
