// Rounds by time and Delayed Nesterov (issue 41, docs/algorithms/outer.md): a round takes the
// steps its driver planned (bounded), the pseudo-gradient is normalised as FedNova does with a
// bounded scale, the schedule runs at the job's pace, and Delayed Nesterov with delay 1 is
// Nesterov while a longer delay steps its momentum with the buffered mean.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "gossamer/optimizers/outer/outer_worker.hpp"

using namespace gossamer;

namespace {

// Every gradient is the vector of ones, and a step moves x by the rate of the schedule position
// the outer layer set (position p has rate 1 + p / 100), so Delta is the sum of the rates.
class FakeWorker final : public proto::LocalWorker {
  public:
    explicit FakeWorker(std::size_t n) : x_(n, 0.0f), g_(n, 1.0f) {}
    std::size_t size() const override { return x_.size(); }
    bool math() const override { return true; }
    std::span<float> params() override { return x_; }
    double compute_gradient(std::span<const float>) override { return 1.0; }
    std::span<const float> gradient() const override { return g_; }
    void apply_gradient(std::span<float> x, std::span<const float> g) override {
        const std::int64_t at = pos_.value_or(steps_);
        positions.push_back(at);
        pos_.reset();
        for (std::size_t i = 0; i < x.size(); ++i) x[i] -= static_cast<float>(rate(at)) * g[i];
        ++steps_;
    }
    std::int64_t steps() const override { return steps_; }
    void set_schedule_step(std::int64_t s) override { pos_ = s; }
    static double rate(std::int64_t at) { return 1.0 + static_cast<double>(at) / 100.0; }
    std::vector<std::int64_t> positions;

  private:
    std::vector<float> x_, g_;
    std::int64_t steps_ = 0;
    std::optional<std::int64_t> pos_;
};

optim::OuterOptions timed(std::int64_t ref, double max_scale = 2.0) {
    optim::OuterOptions o;
    o.seconds = 1.0;
    o.reference_steps = ref;
    o.max_scale = max_scale;
    return o;
}

// The pseudo-gradient of one round of k planned steps (the first value; all are equal).
double delta_of(optim::OuterWorker& w, std::int64_t k) {
    w.plan_round(k);
    const std::vector<float> at(4, 0.0f);
    w.compute_gradient(at);
    return w.gradient()[0];
}

}  // namespace

TEST_CASE("rounds by time: a round takes the planned steps, bounded, and ref without a plan") {
    FakeWorker inner(4);
    optim::OuterWorker w(inner, timed(8), 800, nullptr);
    CHECK(w.round_seconds() == 1.0);
    CHECK(w.steps_per_gradient() == 8);  // no plan: reference_steps
    w.plan_round(3);
    CHECK(w.steps_per_gradient() == 3);
    w.plan_round(0);
    CHECK(w.steps_per_gradient() == 8);
    w.plan_round(1000);
    CHECK(w.steps_per_gradient() == 64);  // 8 x reference_steps
    w.plan_round(5);
    w.compute_gradient(std::vector<float>(4, 0.0f));
    CHECK(inner.steps() == 5);
    CHECK(w.steps_per_gradient() == 8);  // a plan is for one round
    // The last round is the job's remainder of reference_steps, as much shorter in time.
    optim::OuterWorker last(inner, timed(8), 12, nullptr);
    CHECK(last.round_seconds() == 1.0);
    last.compute_gradient(std::vector<float>(4, 0.0f));
    CHECK(last.round_seconds() == doctest::Approx(0.5));
}

TEST_CASE("rounds by time: the schedule runs at the job's pace, whatever a peer's speed") {
    FakeWorker inner(4);
    optim::OuterWorker w(inner, timed(8), 800, nullptr);
    delta_of(w, 4);   // round 0, a slow peer: positions 0, 2, 4, 6
    delta_of(w, 16);  // round 1, a fast round: 8, 8, 9, 9, ..., 15, 15
    const std::vector<std::int64_t> want = {0,  2,  4,  6,  8,  8,  9,  9,  10, 10,
                                            11, 11, 12, 12, 13, 13, 14, 14, 15, 15};
    CHECK(inner.positions == want);
}

TEST_CASE("rounds by time: FedNova normalises by the effective step count, with a bounded scale") {
    // Rates at positions 0..7 of round 0: 1.00 .. 1.07; a_ref = their sum.
    double a_ref = 0;
    for (int j = 0; j < 8; ++j) a_ref += FakeWorker::rate(j);
    SUBCASE("half the steps: scaled up to the common count exactly") {
        FakeWorker inner(4);
        optim::OuterWorker w(inner, timed(8, 4.0), 800, nullptr);  // a_ref / a_i is 2.01
        w.set_inner_rates(FakeWorker::rate, 0.0, 1.0);
        // Steps at 0, 2, 4, 6: Delta = their rates' sum; normalised, a_ref x (Delta / a_i) = a_ref.
        CHECK(delta_of(w, 4) == doctest::Approx(a_ref).epsilon(1e-6));
    }
    SUBCASE("twice the steps: scaled down to the common count") {
        FakeWorker inner(4);
        optim::OuterWorker w(inner, timed(8), 800, nullptr);
        w.set_inner_rates(FakeWorker::rate, 0.0, 1.0);
        CHECK(delta_of(w, 16) == doctest::Approx(a_ref).epsilon(1e-6));
    }
    SUBCASE("a quarter of the steps: the scale stops at max_scale") {
        FakeWorker inner(4);
        optim::OuterWorker w(inner, timed(8), 800, nullptr);
        w.set_inner_rates(FakeWorker::rate, 0.0, 1.0);
        const double own = FakeWorker::rate(0) + FakeWorker::rate(4);
        CHECK(delta_of(w, 2) == doctest::Approx(2 * own).epsilon(1e-6));
        FakeWorker inner4(4);
        optim::OuterWorker w4(inner4, timed(8, 8.0), 800, nullptr);
        w4.set_inner_rates(FakeWorker::rate, 0.0, 1.0);
        CHECK(delta_of(w4, 2) == doctest::Approx(a_ref).epsilon(1e-6));
    }
    SUBCASE("without the rates, the step counts alone normalise") {
        FakeWorker inner(4);
        optim::OuterWorker w(inner, timed(8), 800, nullptr);
        double own = 0;
        for (int j = 0; j < 4; ++j) own += FakeWorker::rate(2 * j);
        CHECK(delta_of(w, 4) == doctest::Approx(2 * own).epsilon(1e-6));
    }
    SUBCASE("the inner momentum cancels, the share of the data weighs") {
        FakeWorker inner(4);
        optim::OuterWorker w(inner, timed(8), 800, nullptr);
        w.set_inner_rates(FakeWorker::rate, 0.9, 1.5);
        CHECK(delta_of(w, 16) == doctest::Approx(1.5 * a_ref).epsilon(1e-6));
    }
    SUBCASE("normalize none: Delta as it is") {
        FakeWorker inner(4);
        auto o = timed(8);
        o.normalize = optim::OuterNormalize::none;
        optim::OuterWorker w(inner, o, 800, nullptr);
        w.set_inner_rates(FakeWorker::rate, 0.0, 1.5);
        double own = 0;
        for (int j = 0; j < 16; ++j) own += FakeWorker::rate(j / 2);
        CHECK(delta_of(w, 16) == doctest::Approx(own).epsilon(1e-6));
    }
}

TEST_CASE(
    "delayed Nesterov: delay 1 is Nesterov, a longer delay steps the momentum with the mean") {
    const std::vector<std::vector<float>> g = {
        {1.0f, -2.0f}, {0.5f, 4.0f}, {3.0f, 1.0f}, {-1.0f, 2.0f}};
    optim::OuterOptions nesterov;
    nesterov.steps = 2;
    nesterov.kind = optim::OuterKind::nesterov;
    nesterov.lr = 0.7;
    nesterov.momentum = 0.9;
    auto delayed1 = nesterov;
    delayed1.kind = optim::OuterKind::delayed_nesterov;
    auto delayed2 = delayed1;
    delayed2.delay = 2;
    FakeWorker a(2), b(2), c(2);
    optim::OuterWorker wa(a, nesterov, 100, nullptr), wb(b, delayed1, 100, nullptr),
        wc(c, delayed2, 100, nullptr);
    std::vector<float> xa = {1, 1}, xb = xa, xc = xa;
    for (const auto& gk : g) {
        wa.apply_gradient(xa, gk);
        wb.apply_gradient(xb, gk);
        wc.apply_gradient(xc, gk);
    }
    CHECK(xa == xb);  // bit for bit
    // delay 2 by hand: plain steps on rounds 1 and 3, momentum steps with the mean on 2 and 4.
    std::vector<double> x = {1, 1}, m = {0, 0};
    for (std::size_t i = 0; i < 2; ++i) {
        x[i] -= 0.7 * g[0][i];
        m[i] = 0.9 * m[i] + (g[0][i] + g[1][i]) / 2;
        x[i] -= 0.7 * (g[1][i] + 0.9 * m[i]);
        x[i] -= 0.7 * g[2][i];
        m[i] = 0.9 * m[i] + (g[2][i] + g[3][i]) / 2;
        x[i] -= 0.7 * (g[3][i] + 0.9 * m[i]);
        CHECK(xc[i] == doctest::Approx(x[i]).epsilon(1e-6));
    }
    CHECK(xc != xa);
}
