#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/local/local_optimizer.hpp"

using namespace gossamer::optim;
using doctest::Approx;

namespace {

OptimizerConfig sgd(double lr, double momentum = 0, bool nesterov = false, double wd = 0) {
    OptimizerConfig c;
    c.kind = OptimizerKind::sgd;
    c.lr = lr;
    c.momentum = momentum;
    c.nesterov = nesterov;
    c.weight_decay = wd;
    return c;
}

OptimizerConfig adam(OptimizerKind kind, double lr, double wd = 0) {
    OptimizerConfig c;
    c.kind = kind;
    c.lr = lr;
    c.weight_decay = wd;
    return c;
}

// Runs `steps` steps of f(p) = 1/2 sum a_i (p_i - c_i)^2 and returns the final distance to c.
double quadratic_distance(const OptimizerConfig& config, int steps) {
    const std::vector<float> a = {1.0f, 10.0f, 0.5f}, c = {3.0f, -2.0f, 0.5f};
    std::vector<float> p = {0.0f, 0.0f, 0.0f}, g(3);
    auto opt = make_optimizer(config, 3);
    for (int t = 0; t < steps; ++t) {
        for (std::size_t i = 0; i < 3; ++i) g[i] = a[i] * (p[i] - c[i]);
        opt->step(p, g);
    }
    double d = 0;
    for (std::size_t i = 0; i < 3; ++i) d += (p[i] - c[i]) * (p[i] - c[i]);
    return std::sqrt(d);
}

}  // namespace

TEST_CASE("plain SGD: p -= lr (g + wd p)") {
    std::vector<float> p = {1.0f, 2.0f};
    const std::vector<float> g = {0.5f, -1.0f};
    auto opt = make_optimizer(sgd(0.1), 2);
    opt->step(p, g);
    CHECK(p[0] == Approx(0.95));
    CHECK(p[1] == Approx(2.1));
    std::vector<float> q = {1.0f, 2.0f};
    auto decayed = make_optimizer(sgd(0.1, 0, false, 0.1), 2);
    decayed->step(q, g);  // g' = {0.6, -0.8}
    CHECK(q[0] == Approx(0.94));
    CHECK(q[1] == Approx(2.08));
}

TEST_CASE("heavy-ball momentum accumulates: buf = mu buf + g, p -= lr buf") {
    std::vector<float> p = {1.0f};
    const std::vector<float> g = {1.0f};
    auto opt = make_optimizer(sgd(0.1, 0.9), 1);
    opt->step(p, g);  // buf 1
    CHECK(p[0] == Approx(0.9));
    opt->step(p, g);  // buf 1.9
    CHECK(p[0] == Approx(0.71));
    opt->step(p, g);  // buf 2.71
    CHECK(p[0] == Approx(0.439));
}

TEST_CASE("Nesterov looks ahead: p -= lr (g + mu buf), one step ahead of heavy ball") {
    std::vector<float> p = {1.0f};
    const std::vector<float> g = {1.0f};
    auto opt = make_optimizer(sgd(0.1, 0.9, true), 1);
    opt->step(p, g);  // buf 1, direction 1.9
    CHECK(p[0] == Approx(0.81));
    opt->step(p, g);  // buf 1.9, direction 2.71
    CHECK(p[0] == Approx(0.539));
}

TEST_CASE("Adam's first step has size lr whatever the gradient scale (bias correction)") {
    for (float grad : {0.5f, -100.0f, 1e-3f}) {
        std::vector<float> p = {1.0f};
        auto opt = make_optimizer(adam(OptimizerKind::adam, 0.01), 1);
        opt->step(p, std::vector<float>{grad});
        // Uncorrected moments would give a step of lr * 0.1 / sqrt(0.001) = 3.16 lr.
        CHECK(p[0] == Approx(1.0 - 0.01 * (grad > 0 ? 1 : -1)).epsilon(1e-5));
    }
}

TEST_CASE("Adam's second step matches the hand-computed moments") {
    std::vector<float> p = {1.0f};
    auto opt = make_optimizer(adam(OptimizerKind::adam, 0.01), 1);
    opt->step(p, std::vector<float>{0.5f});
    opt->step(p, std::vector<float>{-1.0f});
    // m = 0.9 * 0.05 - 0.1 = -0.055, v = 0.999 * 0.00025 + 0.001 = 0.00124975,
    // m_hat = m / 0.19, v_hat = v / 0.001999, step = 0.01 * m_hat / (sqrt(v_hat) + 1e-8).
    const double m_hat = -0.055 / 0.19, v_hat = 0.00124975 / 0.001999;
    CHECK(p[0] == Approx(0.99 - 0.01 * m_hat / (std::sqrt(v_hat) + 1e-8)).epsilon(1e-6));
    CHECK(p[0] == Approx(0.993661).epsilon(1e-5));
    CHECK(opt->steps() == 2);
}

TEST_CASE("AdamW decays the weights directly, Adam's L2 goes through the moments") {
    // Zero gradient: Adam+L2 sees g' = wd p and moves by ~lr; AdamW only shrinks p by lr wd.
    std::vector<float> p_l2 = {1.0f}, p_w = {1.0f};
    const std::vector<float> zero = {0.0f};
    make_optimizer(adam(OptimizerKind::adam, 0.01, 0.1), 1)->step(p_l2, zero);
    make_optimizer(adam(OptimizerKind::adamw, 0.01, 0.1), 1)->step(p_w, zero);
    CHECK(p_l2[0] == Approx(0.99).epsilon(1e-6));
    CHECK(p_w[0] == Approx(0.999).epsilon(1e-7));
    // Without weight decay the two are the same rule.
    std::vector<float> a = {0.3f, -2.0f}, b = a;
    auto oa = make_optimizer(adam(OptimizerKind::adam, 0.05), 2);
    auto ob = make_optimizer(adam(OptimizerKind::adamw, 0.05), 2);
    for (int t = 0; t < 5; ++t) {
        const std::vector<float> g = {a[0] - 1.0f, 2.0f * a[1]};
        oa->step(a, g);
        ob->step(b, g);
    }
    CHECK(a == b);
}

TEST_CASE("every optimizer converges on a convex quadratic") {
    CHECK(quadratic_distance(sgd(0.05), 2000) < 1e-3);
    CHECK(quadratic_distance(sgd(0.02, 0.9), 2000) < 1e-3);
    CHECK(quadratic_distance(sgd(0.02, 0.9, true), 2000) < 1e-3);
    CHECK(quadratic_distance(adam(OptimizerKind::adam, 0.01), 3000) < 1e-2);
    CHECK(quadratic_distance(adam(OptimizerKind::adamw, 0.01), 3000) < 1e-2);
    // Sanity: too few steps do not get there, so the bound above means something.
    CHECK(quadratic_distance(sgd(0.05), 5) > 0.5);
}

TEST_CASE("each partition keeps its own state") {
    // Two partitions stepping at different rates: the slow one's first step is still an Adam
    // first step (bias-corrected, size lr) although the fast one has taken three.
    auto fast = make_optimizer(adam(OptimizerKind::adam, 0.01), 2);
    auto slow = make_optimizer(adam(OptimizerKind::adam, 0.01), 1);
    std::vector<float> pf = {0.0f, 0.0f}, ps = {0.0f};
    for (int t = 0; t < 3; ++t) fast->step(pf, std::vector<float>{1.0f, 1.0f});
    slow->step(ps, std::vector<float>{-4.0f});
    CHECK(ps[0] == Approx(0.01).epsilon(1e-5));
    CHECK(fast->steps() == 3);
    CHECK(slow->steps() == 1);
}

TEST_CASE("reset forgets momentum, the rate passed to step overrides the base rate") {
    auto opt = make_optimizer(sgd(0.1, 0.9), 1);
    std::vector<float> p = {1.0f};
    opt->step(p, std::vector<float>{1.0f});
    opt->reset();
    CHECK(opt->steps() == 0);
    p = {1.0f};
    opt->step(p, std::vector<float>{1.0f});
    CHECK(p[0] == Approx(0.9));                   // as a first step again
    opt->step(p, std::vector<float>{0.0f}, 0.5);  // buf 0.9
    CHECK(p[0] == Approx(0.45));
}

TEST_CASE("mismatched spans and bad rates are refused") {
    auto opt = make_optimizer(sgd(0.1), 3);
    std::vector<float> p(3), g(2);
    CHECK_THROWS_AS(opt->step(p, g), gossamer::Error);
    g.resize(3);
    CHECK_THROWS_AS(opt->step(p, g, -0.1), gossamer::Error);
    CHECK_THROWS_AS(opt->step(p, g, NAN), gossamer::Error);
    CHECK_NOTHROW(opt->step(p, g, 0.0));
    CHECK_THROWS_AS(make_optimizer(sgd(0.0), 3), gossamer::ConfigError);
}
