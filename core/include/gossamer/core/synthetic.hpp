#pragma once
/// Synthetic data sets with a known optimum, for tests that check training converges.
///
/// Both generators are deterministic for a seed. Both optimum functions work in double precision
/// on the very float values stored in the Dataset, so a model trained on the set can be compared
/// with them to 1e-3 or better. The linear model is f(x) = w.x + b (b only when `bias` is set).

#include <cstdint>
#include <vector>

#include "gossamer/core/dataset.hpp"

namespace gossamer {

/// A generated set together with the parameters it was drawn from.
struct SyntheticSet {
    Dataset data;
    std::vector<double> w_true;  ///< the generating weights, d values
    double b_true = 0.0;         ///< the generating intercept
};

/// Binary logistic regression: x ~ N(0, I_d); w_true ~ N(0, 4/d I) so that w_true.x has a
/// standard deviation near 2; b_true = 0.25; label 1 with probability sigmoid(w_true.x + b_true),
/// else 0 (Bernoulli labels, so the classes overlap and the optimum is finite once n >> d).
/// classes = 2, labels in {0, 1}. Throws ConfigError for n < 1 or d < 1.
SyntheticSet make_logistic_regression(std::int64_t n, int d, std::uint64_t seed);

/// Least squares: A ~ N(0, I_d) rows, w_true ~ N(0, I), b_true = 0.5,
/// target y = w_true.a + b_true + noise * N(0, 1). classes = 0, one target per sample.
/// Throws ConfigError for n < 1, d < 1 or noise < 0.
SyntheticSet make_least_squares(std::int64_t n, int d, std::uint64_t seed, double noise = 0.1);

/// How the optimum of a linear model is defined.
struct LinearFit {
    bool bias = true;  ///< fit an intercept b (never penalised)
    double l2 = 0.0;   ///< adds (l2 / 2) * |w|^2 to the mean loss; >= 0
};

/// The minimiser of a loss over (w, b) and the loss it reaches.
struct LinearOptimum {
    double loss = 0.0;      ///< the minimum objective (mean loss + (l2 / 2) |w|^2)
    std::vector<double> w;  ///< features values
    double b = 0.0;         ///< 0 when the fit has no bias
    int iterations = 0;     ///< Newton iterations (1 for least squares)
};

/// Mean binary cross-entropy of sigmoid(w.x + b) against labels {0, 1} plus (l2 / 2) |w|^2,
/// in double precision (log(1 + e^z) - y z, computed without overflow).
double logistic_loss(const Dataset& data, const std::vector<double>& w, double b, double l2 = 0.0);

/// Mean squared error (1/n) sum (w.x + b - y)^2 plus (l2 / 2) |w|^2 (no 1/2 on the mean term,
/// as in torch.nn.MSELoss).
double squared_loss(const Dataset& data, const std::vector<double>& w, double b, double l2 = 0.0);

/// The minimum of logistic_loss by Newton's method with backtracking (Cholesky solve of the
/// (d+1)^2 Hessian), stopped when the squared Newton decrement falls below 1e-16 times the loss
/// (and the gradient norm below 1e-8).
/// Throws ConfigError when the set has no labels in {0, 1}, and Error when Newton does not
/// converge in 100 iterations (linearly separable data has no finite optimum: use l2 > 0).
LinearOptimum logistic_optimum(const Dataset& data, const LinearFit& fit = {});

/// The minimum of squared_loss from the normal equations (X^T X / n + (l2/2) I) [w; b] = X^T y / n
/// solved by Cholesky. Throws ConfigError when the set has no targets, and Error when X^T X is
/// singular (fewer independent samples than features, and l2 = 0).
LinearOptimum least_squares_optimum(const Dataset& data, const LinearFit& fit = {});

}  // namespace gossamer
