// Finite-difference checks of every built-in model on every coordinate, and the early stop of
// the backward pass (LayerMask).

#include <doctest/doctest.h>

#include <cstring>
#include <limits>

#include "gossamer/core/models.hpp"
#include "model_util.hpp"

using namespace gossamer;
using test_models::batch;
using test_models::check_gradient;
using test_models::noisy_init;
using test_models::random_data;

namespace {

void expect_gradient_ok(Model& m, const Dataset& d, int batch_size, std::uint64_t seed) {
    auto params = noisy_init(m, seed);
    auto r = check_gradient(m, params, batch(d, 0, batch_size));
    INFO(m.describe(), ": ", r.kinks, " kinks; ", r.first_failure);
    CHECK(r.checked == m.parameter_count());
    CHECK(r.failures == 0);
    // Kinks are rare: a ReLU input or a pooling tie within +-h of switching.
    CHECK(r.kinks <= 1 + r.checked / 50);
}

}  // namespace

TEST_CASE("softmax regression gradient matches finite differences (3 classes and 2 classes)") {
    auto d3 = random_data(5, 6, 3, 11);
    auto m3 = models::softmax_regression(6, 3);
    expect_gradient_ok(*m3, d3, 5, 1);
    auto d2 = random_data(4, 5, 2, 12);
    auto m2 = models::softmax_regression(5, 2);
    expect_gradient_ok(*m2, d2, 4, 2);
}

TEST_CASE("linear regression gradient matches finite differences") {
    auto d = random_data(6, 7, 0, 13);
    auto m = models::linear_regression(7);
    expect_gradient_ok(*m, d, 6, 3);
}

TEST_CASE("MLP gradient matches finite differences on every weight and bias") {
    auto d = random_data(4, 6, 3, 14);
    auto m = models::mlp(6, {5, 4}, 3);
    expect_gradient_ok(*m, d, 4, 4);
    auto deep = models::mlp(6, {7, 5, 4}, 3);
    expect_gradient_ok(*deep, d, 3, 5);
}

TEST_CASE("CNN gradient matches finite differences through conv, ReLU and max-pooling") {
    SUBCASE("1x8x8, 3x3 kernels, two stages") {
        auto d = random_data(3, 64, 3, 15, 1, 8, 8);
        auto m = models::cnn(
            {.channels = 1, .height = 8, .width = 8, .filters = {2, 3}, .kernel = 3, .classes = 3});
        expect_gradient_ok(*m, d, 3, 6);
    }
    SUBCASE("2x7x6 (CHW, several input channels, odd sizes), 5x5 kernels") {
        auto d = random_data(2, 84, 2, 16, 2, 7, 6);
        auto m = models::cnn(
            {.channels = 2, .height = 7, .width = 6, .filters = {3, 2}, .kernel = 5, .classes = 2});
        expect_gradient_ok(*m, d, 2, 7);
    }
}

TEST_CASE("a wrong gradient is caught by the check") {
    // The check must be able to fail: a model whose gradient is scaled by 1.05 does not pass.
    struct Scaled final : Model {
        std::unique_ptr<Model> inner = models::softmax_regression(4, 3);
        std::string name() const override { return "scaled"; }
        std::string describe() const override { return "scaled"; }
        std::size_t parameter_count() const override { return inner->parameter_count(); }
        std::span<const Layer> layers() const override { return inner->layers(); }
        int input_features() const override { return 4; }
        int classes() const override { return 3; }
        void init(std::span<float> p, std::uint64_t s) const override { inner->init(p, s); }
        double loss_and_gradient(std::span<const float> p, const Batch& b, std::span<float> g,
                                 const LayerMask& need) override {
            double loss = inner->loss_and_gradient(p, b, g, need);
            for (float& v : g) v *= 1.05f;
            return loss;
        }
        BatchStats forward(std::span<const float> p, const Batch& b) override {
            return inner->forward(p, b);
        }
        std::unique_ptr<Model> clone() const override { return std::make_unique<Scaled>(); }
    } scaled;
    auto d = random_data(4, 4, 3, 17);
    auto params = noisy_init(scaled, 8);
    auto r = check_gradient(scaled, params, batch(d, 0, 4));
    CHECK(r.failures > r.checked / 2);
}

namespace {

// Gradient with `mask`, starting from a buffer full of a sentinel value.
ParamVector masked_gradient(Model& m, const ParamVector& p, const Batch& b, const LayerMask& mask,
                            double* loss) {
    ParamVector g(p.size());
    g.fill(std::numeric_limits<float>::quiet_NaN());
    *loss = m.loss_and_gradient(p, b, g, mask);
    return g;
}

bool untouched(std::span<const float> g) {
    for (float v : g)
        if (!std::isnan(v)) return false;
    return true;
}

void expect_mask_semantics(Model& m, const Dataset& d) {
    auto p = noisy_init(m, 21);
    const Batch b = batch(d, 0, 4);
    ParamVector full(p.size());
    const double full_loss = m.loss_and_gradient(p, b, full);
    const auto layers = m.layers();
    for (std::size_t first = 0; first <= layers.size(); ++first) {
        CAPTURE(first);
        double loss = 0;
        auto g = masked_gradient(m, p, b, LayerMask::from(first), &loss);
        CHECK(loss == full_loss);
        for (std::size_t l = 0; l < layers.size(); ++l) {
            auto got = std::span<const float>(g).subspan(layers[l].offset, layers[l].size);
            auto want = std::span<const float>(full).subspan(layers[l].offset, layers[l].size);
            if (l < first)
                CHECK(untouched(got));
            else
                CHECK(bitwise_equal(got, want));
        }
    }
    // Only the lowest and the top layer: the middle one is passed through, not written.
    std::vector<bool> need(layers.size(), false);
    need.front() = need.back() = true;
    double loss = 0;
    auto g = masked_gradient(m, p, b, LayerMask::only(need), &loss);
    for (std::size_t l = 0; l < layers.size(); ++l) {
        auto got = std::span<const float>(g).subspan(layers[l].offset, layers[l].size);
        auto want = std::span<const float>(full).subspan(layers[l].offset, layers[l].size);
        if (need[l])
            CHECK(bitwise_equal(got, want));
        else
            CHECK(untouched(got));
    }
}

}  // namespace

TEST_CASE("skipping lower layers leaves their gradient untouched and the rest unchanged") {
    SUBCASE("mlp") {
        auto d = random_data(4, 6, 3, 18);
        auto m = models::mlp(6, {5, 4}, 3);
        expect_mask_semantics(*m, d);
    }
    SUBCASE("cnn") {
        auto d = random_data(4, 64, 3, 19, 1, 8, 8);
        auto m = models::cnn(
            {.channels = 1, .height = 8, .width = 8, .filters = {2, 3}, .kernel = 3, .classes = 3});
        expect_mask_semantics(*m, d);
    }
}

TEST_CASE("LayerMask answers which layers are needed") {
    CHECK(LayerMask().needs(0));
    CHECK(*LayerMask::all().lowest(3) == 0);
    CHECK(!LayerMask::from(2).needs(1));
    CHECK(LayerMask::from(2).needs(2));
    CHECK(*LayerMask::from(2).lowest(3) == 2);
    CHECK(!LayerMask::from(3).lowest(3));
    CHECK(!LayerMask::none().lowest(3));
    auto m = LayerMask::only({false, true});
    CHECK(*m.lowest(4) == 1);
    CHECK(!m.needs(2));
}

TEST_CASE("a batch gradient is the mean of the per-sample gradients (chunked convolutions too)") {
    // At 28x28 the CNN convolves in chunks of 13 (stage 1) and 3 (stage 2) samples; a batch of
    // 16 crosses both chunk boundaries.
    auto d = random_data(16, 784, 10, 20, 1, 28, 28);
    std::vector<std::unique_ptr<Model>> all;
    all.push_back(models::cnn({}));
    all.push_back(models::mlp(784, {32, 16}, 10));
    for (auto& m : all) {
        CAPTURE(m->describe());
        auto p = noisy_init(*m, 22);
        ParamVector g(p.size()), one(p.size());
        const double loss = m->loss_and_gradient(p, batch(d, 0, 16), g);
        std::vector<double> mean(p.size(), 0.0);
        double mean_loss = 0;
        for (int i = 0; i < 16; ++i) {
            mean_loss += m->loss_and_gradient(p, batch(d, i, 1), one) / 16;
            for (std::size_t j = 0; j < p.size(); ++j) mean[j] += one[j] / 16.0;
        }
        CHECK(loss == doctest::Approx(mean_loss).epsilon(1e-5));
        double scale = 0, worst = 0;
        for (std::size_t j = 0; j < p.size(); ++j) {
            scale = std::max(scale, std::abs(mean[j]));
            worst = std::max(worst, std::abs(mean[j] - g[j]));
        }
        CHECK(scale > 0);
        CHECK(worst <= 1e-4 * scale);
    }
}
