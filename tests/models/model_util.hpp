#pragma once
// Shared helpers for the model tests: random data and a finite-difference gradient check.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gossamer/core/dataset.hpp"
#include "gossamer/core/model.hpp"
#include "gossamer/core/params.hpp"
#include "gossamer/core/rng.hpp"

namespace test_models {

/// n random N(0, 1) samples with uniformly random labels (classes > 0) or targets (classes == 0).
inline gossamer::Dataset random_data(int n, int features, int classes, std::uint64_t seed,
                                     int channels = 1, int height = 0, int width = 0) {
    gossamer::Rng rng(seed);
    gossamer::Dataset d;
    d.name = "random";
    d.features = features;
    d.classes = classes;
    d.channels = channels;
    d.height = height;
    d.width = width;
    for (int i = 0; i < n * features; ++i) d.x.push_back(static_cast<float>(rng.normal()));
    for (int i = 0; i < n; ++i) {
        if (classes > 0)
            d.labels.push_back(static_cast<std::int32_t>(rng.below(classes)));
        else
            d.targets.push_back(static_cast<float>(rng.normal()));
    }
    return d;
}

/// The batch of samples [first, first + count) of d.
inline gossamer::Batch batch(const gossamer::Dataset& d, int first, int count) {
    gossamer::Batch b;
    b.size = count;
    b.features = d.features;
    b.x = d.x.data() + static_cast<std::size_t>(first) * d.features;
    if (!d.labels.empty()) b.labels = d.labels.data() + first;
    if (!d.targets.empty()) b.targets = d.targets.data() + first;
    return b;
}

/// Initial parameters plus N(0, 0.1^2) noise, so that biases are non-zero too.
inline gossamer::ParamVector noisy_init(const gossamer::Model& m, std::uint64_t seed) {
    gossamer::ParamVector p(m.parameter_count());
    m.init(p, seed);
    gossamer::Rng rng(seed + 1);
    for (std::size_t i = 0; i < p.size(); ++i) p[i] += static_cast<float>(0.1 * rng.normal());
    return p;
}

struct GradCheckResult {
    std::size_t checked = 0;
    std::size_t kinks = 0;     ///< coordinates where f is not smooth within +-2h (ReLU, max-pool)
    std::size_t failures = 0;  ///< coordinates whose analytic gradient is wrong
    std::string first_failure;
};

/// Compares the analytic gradient with the central difference (f(x+h) - f(x-h)) / 2h on every
/// coordinate, f being the loss. The models compute in float, so f carries rounding noise of a
/// few 1e-7 and the estimate an error of up to ~3e-4 at h = 2^-10 (~1e-3; x +- h is exact in
/// float for |x| < 16), while the truncation error, ~h^2 f'''(x) / 6, is far below that. Larger
/// steps cross too many ReLU and max-pooling switches in a CNN (shared weights touch every pixel).
/// A coordinate passes when
///   |analytic - numeric| <= atol + rtol * max(|analytic|, |numeric|),  atol = 5e-4, rtol = 1e-2.
/// Where it does not, it counts as a kink rather than a failure if f is visibly not smooth there
/// (the one-sided differences (f(x+h) - f(x)) / h and (f(x) - f(x-h)) / h disagree beyond that
/// tolerance: a ReLU input or a max-pool tie crossed within +-h) and the analytic value lies
/// between them. Callers bound the number of kinks.
inline GradCheckResult check_gradient(gossamer::Model& m, const gossamer::ParamVector& params,
                                      const gossamer::Batch& b, double h = 0.0009765625,
                                      double rtol = 1e-2, double atol = 5e-4) {
    gossamer::ParamVector grad(params.size());
    m.loss_and_gradient(params, b, grad);
    gossamer::ParamVector p = params;
    const auto none = gossamer::LayerMask::none();
    auto f = [&](std::size_t i, double step) {
        p[i] = static_cast<float>(params[i] + step);
        const double loss = m.loss_and_gradient(p, b, {}, none);
        p[i] = params[i];
        return loss;
    };
    auto close = [&](double a, double c) {
        return std::abs(a - c) <= atol + rtol * std::max(std::abs(a), std::abs(c));
    };
    const double f0 = m.loss_and_gradient(p, b, {}, none);
    GradCheckResult r;
    for (std::size_t i = 0; i < p.size(); ++i) {
        const double fp = f(i, h), fm = f(i, -h);
        const double numeric = (fp - fm) / (2 * h);
        const double analytic = grad[i];
        ++r.checked;
        if (close(analytic, numeric)) continue;
        const double right = (fp - f0) / h, left = (f0 - fm) / h;
        const double tol = atol + rtol * std::max(std::abs(left), std::abs(right));
        if (!close(left, right) && analytic >= std::min(left, right) - tol &&
            analytic <= std::max(left, right) + tol) {
            ++r.kinks;
            continue;
        }
        if (r.failures++ == 0)
            r.first_failure = "coordinate " + std::to_string(i) + ": analytic " +
                              std::to_string(analytic) + ", numeric " + std::to_string(numeric);
    }
    return r;
}

}  // namespace test_models
