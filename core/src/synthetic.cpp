#include "gossamer/core/synthetic.hpp"

#include <fmt/format.h>

#include <cmath>

#include "gossamer/core/error.hpp"
#include "gossamer/core/rng.hpp"

namespace gossamer {
namespace {

void check_shape(std::int64_t n, int d) {
    if (n < 1) throw ConfigError("", "n", fmt::format("{} samples requested", n), "use n >= 1");
    if (d < 1) throw ConfigError("", "d", fmt::format("{} features requested", d), "use d >= 1");
}

// Draws x ~ N(0, I) rows (stored as float) and w_true ~ N(0, scale^2 I).
SyntheticSet draw_gaussian(std::int64_t n, int d, Rng& rng, double w_scale) {
    SyntheticSet s;
    s.w_true.resize(static_cast<std::size_t>(d));
    for (auto& w : s.w_true) w = w_scale * rng.normal();
    s.data.features = d;
    s.data.x.resize(static_cast<std::size_t>(n) * static_cast<std::size_t>(d));
    for (auto& v : s.data.x) v = static_cast<float>(rng.normal());
    return s;
}

// w.x_i + b with the stored float features widened to double.
double affine(const Dataset& data, std::int64_t i, const std::vector<double>& w, double b) {
    const float* x = data.x.data() + i * data.features;
    double z = b;
    for (int j = 0; j < data.features; ++j) z += w[static_cast<std::size_t>(j)] * x[j];
    return z;
}

double penalty(const std::vector<double>& w, double l2) {
    double s = 0;
    for (double v : w) s += v * v;
    return 0.5 * l2 * s;
}

// log(1 + e^z) without overflow.
double softplus(double z) {
    return std::max(z, 0.0) + std::log1p(std::exp(-std::abs(z)));
}

double sigmoid(double z) {
    if (z >= 0) return 1.0 / (1.0 + std::exp(-z));
    const double e = std::exp(z);
    return e / (1.0 + e);
}

// In-place Cholesky of a symmetric m x m row-major matrix, then solves A x = rhs in place.
// Returns false when A is not (numerically) positive definite.
bool cholesky_solve(std::vector<double>& a, std::vector<double>& rhs, std::size_t m) {
    for (std::size_t j = 0; j < m; ++j) {
        double diag = a[j * m + j];
        for (std::size_t k = 0; k < j; ++k) diag -= a[j * m + k] * a[j * m + k];
        if (!(diag > 1e-300)) return false;
        const double l = std::sqrt(diag);
        a[j * m + j] = l;
        for (std::size_t i = j + 1; i < m; ++i) {
            double s = a[i * m + j];
            for (std::size_t k = 0; k < j; ++k) s -= a[i * m + k] * a[j * m + k];
            a[i * m + j] = s / l;
        }
    }
    for (std::size_t i = 0; i < m; ++i) {  // L y = rhs
        double s = rhs[i];
        for (std::size_t k = 0; k < i; ++k) s -= a[i * m + k] * rhs[k];
        rhs[i] = s / a[i * m + i];
    }
    for (std::size_t i = m; i-- > 0;) {  // L^T x = y
        double s = rhs[i];
        for (std::size_t k = i + 1; k < m; ++k) s -= a[k * m + i] * rhs[k];
        rhs[i] = s / a[i * m + i];
    }
    return true;
}

void check_fit(const Dataset& data, const LinearFit& fit) {
    if (!(fit.l2 >= 0) || !std::isfinite(fit.l2))
        throw ConfigError("", "l2", fmt::format("l2 = {} must be finite and >= 0", fit.l2),
                          "use l2 >= 0");
    if (data.features < 1 || data.size() < 1)
        throw ConfigError(data.name, "", "the data set is empty", "generate samples first");
}

}  // namespace

SyntheticSet make_logistic_regression(std::int64_t n, int d, std::uint64_t seed) {
    check_shape(n, d);
    Rng rng(derive_seed(seed, 0x1061));
    SyntheticSet s = draw_gaussian(n, d, rng, 2.0 / std::sqrt(static_cast<double>(d)));
    s.b_true = 0.25;
    s.data.name = "logreg-synthetic";
    s.data.classes = 2;
    s.data.labels.resize(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)
        s.data.labels[static_cast<std::size_t>(i)] =
            rng.uniform() < sigmoid(affine(s.data, i, s.w_true, s.b_true)) ? 1 : 0;
    return s;
}

SyntheticSet make_least_squares(std::int64_t n, int d, std::uint64_t seed, double noise) {
    check_shape(n, d);
    if (!(noise >= 0) || !std::isfinite(noise))
        throw ConfigError("", "noise", fmt::format("noise = {} must be finite and >= 0", noise),
                          "use noise >= 0");
    Rng rng(derive_seed(seed, 0x15));
    SyntheticSet s = draw_gaussian(n, d, rng, 1.0);
    s.b_true = 0.5;
    s.data.name = "least-squares-synthetic";
    s.data.targets.resize(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)
        s.data.targets[static_cast<std::size_t>(i)] =
            static_cast<float>(affine(s.data, i, s.w_true, s.b_true) + noise * rng.normal());
    return s;
}

double logistic_loss(const Dataset& data, const std::vector<double>& w, double b, double l2) {
    const std::int64_t n = data.size();
    double sum = 0;
    for (std::int64_t i = 0; i < n; ++i) {
        const double z = affine(data, i, w, b);
        sum += softplus(z) - data.labels[static_cast<std::size_t>(i)] * z;
    }
    return sum / static_cast<double>(n) + penalty(w, l2);
}

double squared_loss(const Dataset& data, const std::vector<double>& w, double b, double l2) {
    const std::int64_t n = data.size();
    double sum = 0;
    for (std::int64_t i = 0; i < n; ++i) {
        const double r = affine(data, i, w, b) - data.targets[static_cast<std::size_t>(i)];
        sum += r * r;
    }
    return sum / static_cast<double>(n) + penalty(w, l2);
}

LinearOptimum logistic_optimum(const Dataset& data, const LinearFit& fit) {
    check_fit(data, fit);
    if (data.labels.size() != static_cast<std::size_t>(data.size()))
        throw ConfigError(data.name, "", "logistic_optimum needs one label per sample",
                          "use a classification set with labels 0 and 1");
    for (auto y : data.labels)
        if (y != 0 && y != 1)
            throw ConfigError(data.name, "", fmt::format("label {} is not 0 or 1", y),
                              "use a binary set");

    const auto d = static_cast<std::size_t>(data.features);
    const std::size_t m = d + (fit.bias ? 1 : 0);
    const std::int64_t n = data.size();
    const double inv_n = 1.0 / static_cast<double>(n);
    LinearOptimum opt;
    opt.w.assign(d, 0.0);
    double f = logistic_loss(data, opt.w, 0.0, fit.l2);

    for (int it = 0; it < 100; ++it) {
        std::vector<double> grad(m, 0.0), hess(m * m, 0.0), z(m, 1.0);
        for (std::int64_t i = 0; i < n; ++i) {
            const float* x = data.x.data() + i * data.features;
            for (std::size_t j = 0; j < d; ++j) z[j] = x[j];
            const double p = sigmoid(affine(data, i, opt.w, opt.b));
            const double r = p - data.labels[static_cast<std::size_t>(i)];
            const double s = p * (1 - p);
            for (std::size_t j = 0; j < m; ++j) {
                grad[j] += r * z[j];
                for (std::size_t k = 0; k <= j; ++k) hess[j * m + k] += s * z[j] * z[k];
            }
        }
        double gnorm = 0;
        for (std::size_t j = 0; j < m; ++j) {
            grad[j] = grad[j] * inv_n + (j < d ? fit.l2 * opt.w[j] : 0.0);
            gnorm += grad[j] * grad[j];
            for (std::size_t k = 0; k <= j; ++k) {
                hess[j * m + k] = hess[j * m + k] * inv_n + (j == k && j < d ? fit.l2 : 0.0);
                hess[k * m + j] = hess[j * m + k];
            }
        }
        opt.iterations = it;
        opt.loss = f;

        std::vector<double> step = grad;
        if (!cholesky_solve(hess, step, m)) break;  // flat Hessian: weights ran off to infinity
        double decrease = 0;                        // the squared Newton decrement g^T H^-1 g
        for (std::size_t j = 0; j < m; ++j) decrease += grad[j] * step[j];
        // Relative to the loss: on separable data the loss and the decrement shrink together
        // while the weights run off to infinity, so an absolute tolerance would stop there.
        if (decrease <= 1e-16 * f && std::sqrt(gnorm) < 1e-8) return opt;
        // Backtracking (Armijo) keeps Newton safe far from the optimum. Near it the predicted
        // decrease is below the rounding noise of the loss, so the full step is taken unchecked
        // (Newton converges quadratically there).
        if (decrease < 1e-10) {
            for (std::size_t j = 0; j < d; ++j) opt.w[j] -= step[j];
            if (fit.bias) opt.b -= step[d];
            f = logistic_loss(data, opt.w, opt.b, fit.l2);
            continue;
        }
        bool moved = false;
        for (double t = 1.0; t > 1e-12; t *= 0.5) {
            std::vector<double> w = opt.w;
            for (std::size_t j = 0; j < d; ++j) w[j] -= t * step[j];
            const double b = fit.bias ? opt.b - t * step[d] : 0.0;
            const double f_new = logistic_loss(data, w, b, fit.l2);
            if (f_new <= f - 1e-4 * t * decrease) {
                opt.w = std::move(w);
                opt.b = b;
                f = f_new;
                moved = true;
                break;
            }
        }
        if (!moved) break;
    }
    throw Error(
        fmt::format("{}: Newton's method did not converge for the logistic optimum; the "
                    "data may be linearly separable (use more samples or l2 > 0)",
                    data.name));
}

LinearOptimum least_squares_optimum(const Dataset& data, const LinearFit& fit) {
    check_fit(data, fit);
    if (data.targets.size() != static_cast<std::size_t>(data.size()))
        throw ConfigError(data.name, "", "least_squares_optimum needs one target per sample",
                          "use a regression set");
    const auto d = static_cast<std::size_t>(data.features);
    const std::size_t m = d + (fit.bias ? 1 : 0);
    const std::int64_t n = data.size();
    std::vector<double> gram(m * m, 0.0), rhs(m, 0.0), z(m, 1.0);
    for (std::int64_t i = 0; i < n; ++i) {
        const float* x = data.x.data() + i * data.features;
        for (std::size_t j = 0; j < d; ++j) z[j] = x[j];
        const double y = data.targets[static_cast<std::size_t>(i)];
        for (std::size_t j = 0; j < m; ++j) {
            rhs[j] += z[j] * y;
            for (std::size_t k = 0; k <= j; ++k) gram[j * m + k] += z[j] * z[k];
        }
    }
    // Mean loss (1/n)|Xw - y|^2 + (l2/2)|w|^2 has gradient (2/n) X^T (Xw - y) + l2 w, so the
    // normal equations are (X^T X / n + (l2/2) I) w = X^T y / n.
    const double inv_n = 1.0 / static_cast<double>(n);
    for (std::size_t j = 0; j < m; ++j) {
        rhs[j] *= inv_n;
        for (std::size_t k = 0; k <= j; ++k) {
            gram[j * m + k] = gram[j * m + k] * inv_n + (j == k && j < d ? 0.5 * fit.l2 : 0.0);
            gram[k * m + j] = gram[j * m + k];
        }
    }
    if (!cholesky_solve(gram, rhs, m))
        throw Error(
            fmt::format("{}: X^T X is singular, the least-squares optimum is not unique "
                        "(use more samples than features or l2 > 0)",
                        data.name));
    LinearOptimum opt;
    opt.w.assign(rhs.begin(), rhs.begin() + static_cast<std::ptrdiff_t>(d));
    opt.b = fit.bias ? rhs[d] : 0.0;
    opt.iterations = 1;
    opt.loss = squared_loss(data, opt.w, opt.b, fit.l2);
    return opt;
}

}  // namespace gossamer
