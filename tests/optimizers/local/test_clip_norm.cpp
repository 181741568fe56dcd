// Global-norm gradient clipping ("optimizer": {"clip_norm": c}): the step applies g scaled by
// min(1, c / ||g||), the norm over the whole gradient the step applies.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gossamer/optimizers/local/training_worker.hpp"

namespace optim = gossamer::optim;

namespace {

optim::TrainingConfig config(const std::string& clip) {
    return optim::parse_training_config(gossamer::json::parse_text(
        R"({"data": {"name": "logreg_synthetic", "samples": 100, "features": 3},
            "model": {"name": "mlp", "hidden": [4]},
            "optimizer": {"name": "sgd", "lr": 1)" +
            clip + R"(}, "training": {"batch_size": 5}, "seed": 3})",
        "t.json"));
}

// The change of the parameters over one step of peer 0 of 2.
std::vector<double> one_step(const std::string& clip) {
    const auto c = config(clip);
    const auto data = optim::load_training_data(c);
    auto w = optim::make_training_worker(c, data.train, 0, 2, 1);
    const std::vector<float> before(w.trainer->params().begin(), w.trainer->params().end());
    w.trainer->step();
    std::vector<double> d;
    for (std::size_t i = 0; i < before.size(); ++i)
        d.push_back(static_cast<double>(w.trainer->params()[i]) - before[i]);
    return d;
}

double norm(const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x * x;
    return std::sqrt(s);
}

}  // namespace

TEST_CASE("clip_norm: a step larger than the bound is scaled to it, along the same direction") {
    const auto free = one_step("");
    const double g = norm(free);  // lr 1: the gradient's norm
    REQUIRE(g > 1e-3);
    const auto clipped = one_step(R"(, "clip_norm": )" + std::to_string(g / 2));
    CHECK(norm(clipped) == doctest::Approx(g / 2).epsilon(1e-4));
    std::vector<double> off(free.size());
    for (std::size_t i = 0; i < free.size(); ++i) off[i] = clipped[i] - free[i] / 2;
    CHECK(norm(off) < 1e-5 * g);  // the same direction, up to float rounding of the parameters
    // A bound above the norm changes nothing, bit for bit.
    CHECK(one_step(R"(, "clip_norm": 1e6)") == free);
}
