#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "gossamer/core/error.hpp"
#include "gossamer/core/synthetic.hpp"

using namespace gossamer;

namespace {

// Mean logistic-loss gradient (w part then b) at (w, b), by central differences of the loss.
std::vector<double> numeric_gradient(const Dataset& d, std::vector<double> w, double b, double l2,
                                     bool squared) {
    const double h = 1e-5;
    auto loss = [&](const std::vector<double>& ww, double bb) {
        return squared ? squared_loss(d, ww, bb, l2) : logistic_loss(d, ww, bb, l2);
    };
    std::vector<double> g;
    for (std::size_t j = 0; j < w.size(); ++j) {
        const double keep = w[j];
        w[j] = keep + h;
        const double up = loss(w, b);
        w[j] = keep - h;
        const double down = loss(w, b);
        w[j] = keep;
        g.push_back((up - down) / (2 * h));
    }
    g.push_back((loss(w, b + h) - loss(w, b - h)) / (2 * h));
    return g;
}

}  // namespace

TEST_CASE("logistic set: deterministic for a seed, binary labels from a known separator") {
    const auto a = make_logistic_regression(500, 6, 42);
    const auto b = make_logistic_regression(500, 6, 42);
    const auto c = make_logistic_regression(500, 6, 43);
    CHECK(a.data.x == b.data.x);
    CHECK(a.data.labels == b.data.labels);
    CHECK(a.w_true == b.w_true);
    CHECK(a.data.x != c.data.x);
    CHECK(a.data.size() == 500);
    CHECK(a.data.features == 6);
    CHECK(a.data.classes == 2);
    CHECK(a.w_true.size() == 6);
    int ones = 0, agree = 0;
    for (std::int64_t i = 0; i < 500; ++i) {
        const int y = a.data.labels[static_cast<std::size_t>(i)];
        REQUIRE((y == 0 || y == 1));
        ones += y;
        double z = a.b_true;
        for (int j = 0; j < 6; ++j)
            z += a.w_true[static_cast<std::size_t>(j)] * a.data.x[i * 6 + j];
        agree += (z > 0) == (y == 1);
    }
    CHECK(ones > 150);
    CHECK(ones < 350);
    // Labels follow w_true mostly (signal) but not always (Bernoulli noise: not separable).
    CHECK(agree > 350);
    CHECK(agree < 500);
}

TEST_CASE("logistic optimum: zero gradient, below the generating weights, near them for large n") {
    const auto s = make_logistic_regression(4000, 5, 7);
    const auto opt = logistic_optimum(s.data);
    REQUIRE(opt.w.size() == 5);
    for (double g : numeric_gradient(s.data, opt.w, opt.b, 0.0, false)) CHECK(std::abs(g) < 1e-7);
    CHECK(opt.loss == doctest::Approx(logistic_loss(s.data, opt.w, opt.b)).epsilon(1e-12));
    CHECK(opt.loss < logistic_loss(s.data, s.w_true, s.b_true));
    CHECK(opt.loss > 0.2);  // overlapping classes: far from zero
    for (std::size_t j = 0; j < 5; ++j) CHECK(std::abs(opt.w[j] - s.w_true[j]) < 0.2);
    CHECK(std::abs(opt.b - s.b_true) < 0.2);
    CHECK(opt.iterations < 20);
}

TEST_CASE("logistic optimum with L2 and without bias satisfies its own optimality condition") {
    const auto s = make_logistic_regression(300, 4, 3);
    const LinearFit fit{.bias = false, .l2 = 0.05};
    const auto opt = logistic_optimum(s.data, fit);
    CHECK(opt.b == 0.0);
    const auto g = numeric_gradient(s.data, opt.w, 0.0, 0.05, false);
    for (std::size_t j = 0; j < 4; ++j) CHECK(std::abs(g[j]) < 1e-7);
    // The penalty pulls the weights in compared with the unpenalised fit.
    const auto free = logistic_optimum(s.data, {.bias = false, .l2 = 0.0});
    double n_pen = 0, n_free = 0;
    for (std::size_t j = 0; j < 4; ++j) {
        n_pen += opt.w[j] * opt.w[j];
        n_free += free.w[j] * free.w[j];
    }
    CHECK(n_pen < n_free);
}

TEST_CASE("separable data has no finite logistic optimum unless L2 is added") {
    Dataset d;
    d.name = "separable";
    d.features = 1;
    d.classes = 2;
    d.x = {-2, -1, 1, 2};
    d.labels = {0, 0, 1, 1};
    CHECK_THROWS_AS(logistic_optimum(d), Error);
    const auto opt = logistic_optimum(d, {.bias = true, .l2 = 0.1});
    CHECK(opt.w[0] > 0);
}

TEST_CASE("least squares: the normal-equation optimum has residuals orthogonal to the data") {
    const auto s = make_least_squares(2000, 8, 11, 0.1);
    CHECK(s.data.classes == 0);
    CHECK(s.data.targets.size() == 2000);
    CHECK(s.data.labels.empty());
    const auto opt = least_squares_optimum(s.data);
    for (double g : numeric_gradient(s.data, opt.w, opt.b, 0.0, true)) CHECK(std::abs(g) < 1e-7);
    for (std::size_t j = 0; j < 8; ++j) CHECK(std::abs(opt.w[j] - s.w_true[j]) < 0.02);
    CHECK(std::abs(opt.b - s.b_true) < 0.02);
    // With noise 0.1 the optimum mean squared error is close to 0.1^2 and below the truth's.
    CHECK(opt.loss == doctest::Approx(0.01).epsilon(0.15));
    CHECK(opt.loss < squared_loss(s.data, s.w_true, s.b_true));
    const auto again = make_least_squares(2000, 8, 11, 0.1);
    CHECK(again.data.targets == s.data.targets);
}

TEST_CASE("least squares with L2 satisfies (2/n) X^T r + l2 w = 0") {
    const auto s = make_least_squares(200, 3, 5, 0.5);
    const auto opt = least_squares_optimum(s.data, {.bias = true, .l2 = 0.3});
    for (double g : numeric_gradient(s.data, opt.w, opt.b, 0.3, true)) CHECK(std::abs(g) < 1e-7);
    CHECK(opt.loss == doctest::Approx(squared_loss(s.data, opt.w, opt.b, 0.3)).epsilon(1e-12));
}

TEST_CASE("noise-free least squares recovers the generating weights exactly") {
    const auto s = make_least_squares(50, 4, 2, 0.0);
    const auto opt = least_squares_optimum(s.data);
    CHECK(opt.loss < 1e-10);
    for (std::size_t j = 0; j < 4; ++j)
        CHECK(opt.w[j] == doctest::Approx(s.w_true[j]).epsilon(1e-5));
}

TEST_CASE("fewer samples than features make least squares singular") {
    const auto s = make_least_squares(3, 6, 1, 0.1);
    CHECK_THROWS_AS(least_squares_optimum(s.data), Error);
    CHECK_NOTHROW(least_squares_optimum(s.data, {.bias = true, .l2 = 0.1}));
}

TEST_CASE("bad arguments and mismatched sets are ConfigErrors") {
    CHECK_THROWS_AS(make_logistic_regression(0, 3, 1), ConfigError);
    CHECK_THROWS_AS(make_logistic_regression(10, 0, 1), ConfigError);
    CHECK_THROWS_AS(make_least_squares(10, 2, 1, -1.0), ConfigError);
    const auto reg = make_least_squares(20, 2, 1);
    CHECK_THROWS_AS(logistic_optimum(reg.data), ConfigError);
    const auto cls = make_logistic_regression(20, 2, 1);
    CHECK_THROWS_AS(least_squares_optimum(cls.data), ConfigError);
    CHECK_THROWS_AS(least_squares_optimum(reg.data, {.bias = true, .l2 = -1}), ConfigError);
}
