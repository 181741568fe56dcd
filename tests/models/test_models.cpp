// Built-in models: layouts, initialisation, reproducibility, evaluation and training.

#include <doctest/doctest.h>

#include <cmath>

#include "gossamer/core/models.hpp"
#include "model_util.hpp"

using namespace gossamer;
using test_models::batch;
using test_models::random_data;

namespace {

struct Moments {
    double mean = 0, sd = 0, max_abs = 0;
};

Moments moments(std::span<const float> v) {
    Moments m;
    for (float x : v) m.mean += x;
    m.mean /= static_cast<double>(v.size());
    for (float x : v) {
        m.sd += (x - m.mean) * (x - m.mean);
        m.max_abs = std::max(m.max_abs, std::abs(static_cast<double>(x)));
    }
    m.sd = std::sqrt(m.sd / static_cast<double>(v.size()));
    return m;
}

bool all_zero(std::span<const float> v) {
    for (float x : v)
        if (x != 0.0f) return false;
    return true;
}

}  // namespace

TEST_CASE("layouts: layer names, ranges and parameter counts") {
    auto m = models::mlp(784, {256, 128}, 10);
    CHECK(m->parameter_count() == 235146);
    REQUIRE(m->layers().size() == 3);
    CHECK(m->layers()[0] == Partition{"fc1", 0, 200960});
    CHECK(m->layers()[1] == Partition{"fc2", 200960, 32896});
    CHECK(m->layers()[2] == Partition{"fc3", 233856, 1290});
    CHECK(m->describe() == "mlp 784-256-128-10 (235146 parameters)");

    auto c = models::cnn({});
    REQUIRE(c->layers().size() == 3);
    CHECK(c->layers()[0] == Partition{"conv1", 0, 16 * 25 + 16});
    CHECK(c->layers()[1] == Partition{"conv2", 416, 32 * 16 * 25 + 32});
    CHECK(c->layers()[2] == Partition{"fc", 13248, 10 * 7 * 7 * 32 + 10});
    CHECK(c->parameter_count() == 28938);
    CHECK(c->input_features() == 784);

    CHECK(models::softmax_regression(20, 2)->layers()[0] == Partition{"fc", 0, 42});
    CHECK(models::linear_regression(20)->parameter_count() == 21);
    CHECK(models::linear_regression(20)->classes() == 0);
    CHECK(m->default_partitions().count() == 3);
}

TEST_CASE("init: He for ReLU layers, Glorot for the output layer, zero biases, deterministic") {
    auto m = models::mlp(784, {256, 128}, 10);
    ParamVector a(m->parameter_count()), b(m->parameter_count()), c(m->parameter_count());
    m->init(a, 42);
    models::mlp(784, {256, 128}, 10)->init(b, 42);
    m->init(c, 43);
    CHECK(bitwise_equal(a, b));
    CHECK(!bitwise_equal(a, c));

    const auto fc1 = moments(a.slice(0, 784 * 256));
    CHECK(std::abs(fc1.mean) < 0.002);
    CHECK(fc1.sd == doctest::Approx(std::sqrt(2.0 / 784)).epsilon(0.02));
    const auto fc2 = moments(a.slice(200960, 256 * 128));
    CHECK(fc2.sd == doctest::Approx(std::sqrt(2.0 / 256)).epsilon(0.03));
    const double limit = std::sqrt(6.0 / (128 + 10));
    const auto fc3 = moments(a.slice(233856, 1280));
    CHECK(fc3.max_abs <= limit);
    CHECK(fc3.max_abs > 0.95 * limit);
    CHECK(fc3.sd == doctest::Approx(limit / std::sqrt(3.0)).epsilon(0.06));
    CHECK(all_zero(a.slice(200960 - 256, 256)));
    CHECK(all_zero(a.slice(233856 - 128, 128)));
    CHECK(all_zero(a.slice(235146 - 10, 10)));

    auto cnn = models::cnn({});
    ParamVector p(cnn->parameter_count());
    p.fill(1.0f);
    cnn->init(p, 7);
    CHECK(moments(p.slice(0, 400)).sd == doctest::Approx(std::sqrt(2.0 / 25)).epsilon(0.1));
    CHECK(all_zero(p.slice(400, 16)));
    CHECK(all_zero(p.slice(416 + 12800, 32)));
    CHECK(all_zero(p.slice(28938 - 10, 10)));
}

TEST_CASE("the same seed gives bit-identical losses and gradients across runs and clones") {
    auto d = random_data(16, 64, 4, 5, 1, 8, 8);
    std::vector<std::unique_ptr<Model>> first;
    first.push_back(models::mlp(64, {32, 16}, 4));
    first.push_back(models::softmax_regression(64, 4));
    first.push_back(models::cnn(
        {.channels = 1, .height = 8, .width = 8, .filters = {4, 8}, .kernel = 3, .classes = 4}));
    for (auto& m : first) {
        CAPTURE(m->describe());
        auto run = [&](Model& model, ParamVector& grad) {
            ParamVector p(model.parameter_count());
            model.init(p, 99);
            return model.loss_and_gradient(p, batch(d, 0, 16), grad);
        };
        ParamVector g1(m->parameter_count()), g2(m->parameter_count()), g3(m->parameter_count());
        const double l1 = run(*m, g1);
        auto other = m->clone();
        const double l2 = run(*other, g2);
        const double l3 = run(*m, g3);  // the same object again, with warm scratch buffers
        CHECK(l1 == l2);
        CHECK(l1 == l3);
        CHECK(bitwise_equal(g1, g2));
        CHECK(bitwise_equal(g1, g3));
        CHECK(std::isfinite(l1));
    }
}

TEST_CASE("evaluate: mean loss and accuracy over the data set in any batch size") {
    auto d = random_data(10, 5, 4, 6);
    auto m = models::softmax_regression(5, 4);
    ParamVector zero(m->parameter_count());  // uniform predictions: loss ln 4, arg-max class 0
    auto r = m->evaluate(zero, d, 3);
    CHECK(r.samples == 10);
    CHECK(r.loss == doctest::Approx(std::log(4.0)));
    const auto zeros = std::count(d.labels.begin(), d.labels.end(), 0);
    REQUIRE(r.accuracy.has_value());
    CHECK(*r.accuracy == doctest::Approx(zeros / 10.0));

    ParamVector p(m->parameter_count());
    m->init(p, 3);
    auto whole = m->evaluate(p, d, 256);
    auto pieces = m->evaluate(p, d, 3);
    CHECK(whole.loss == doctest::Approx(pieces.loss).epsilon(1e-12));
    CHECK(*whole.accuracy == *pieces.accuracy);

    auto reg = random_data(7, 3, 0, 8);
    auto lin = models::linear_regression(3);
    ParamVector w(lin->parameter_count());
    auto lr = lin->evaluate(w, reg);
    CHECK(!lr.accuracy.has_value());
    double mse = 0;
    for (float t : reg.targets) mse += static_cast<double>(t) * t;
    CHECK(lr.loss == doctest::Approx(mse / 7));
}

TEST_CASE("misuse is reported: wrong sizes, missing labels, labels out of range") {
    auto m = models::softmax_regression(5, 3);
    auto d = random_data(4, 5, 3, 9);
    ParamVector p(m->parameter_count()), g(m->parameter_count()), short_g(3);
    CHECK_THROWS_AS(m->loss_and_gradient(short_g, batch(d, 0, 4), g), Error);
    CHECK_THROWS_AS(m->loss_and_gradient(p, batch(d, 0, 4), short_g), Error);
    Batch no_labels = batch(d, 0, 4);
    no_labels.labels = nullptr;
    CHECK_THROWS_AS(m->loss_and_gradient(p, no_labels, g), Error);
    d.labels[2] = 3;
    CHECK_THROWS_WITH_AS(m->loss_and_gradient(p, batch(d, 0, 4), g),
                         "label 3 of sample 2 is outside [0, 3)", Error);
    CHECK_THROWS_AS(models::cnn({.kernel = 4}), Error);
    CHECK_THROWS_AS(models::mlp(10, {0}, 3), Error);
}

namespace {

// Three well separated Gaussian blobs in 8 dimensions.
Dataset blobs(int n, std::uint64_t seed) {
    Rng rng(seed);
    Dataset d;
    d.name = "blobs";
    d.features = 8;
    d.classes = 3;
    for (int i = 0; i < n; ++i) {
        const auto y = static_cast<int>(rng.below(3));
        for (int j = 0; j < 8; ++j)
            d.x.push_back(static_cast<float>((j % 3 == y ? 2.0 : 0.0) + 0.5 * rng.normal()));
        d.labels.push_back(y);
    }
    return d;
}

}  // namespace

TEST_CASE("SGD on softmax regression drives the loss down on separable data") {
    auto d = blobs(600, 1);
    auto m = models::softmax_regression(8, 3);
    ParamVector p(m->parameter_count()), g(m->parameter_count());
    m->init(p, 1);
    const auto before = m->evaluate(p, d);
    for (int step = 0; step < 300; ++step) {
        const int first = (step * 32) % (600 - 32);
        m->loss_and_gradient(p, batch(d, first, 32), g);
        for (std::size_t i = 0; i < p.size(); ++i) p[i] -= 0.2f * g[i];
    }
    const auto after = m->evaluate(p, d);
    CHECK(before.loss > 0.5);
    CHECK(after.loss < 0.1 * before.loss);
    CHECK(*after.accuracy > 0.98);
}

TEST_CASE("SGD on linear regression recovers a least-squares fit") {
    Rng rng(2);
    Dataset d;
    d.features = 4;
    const float w[4] = {1.5f, -2.0f, 0.5f, 0.0f};
    for (int i = 0; i < 400; ++i) {
        float y = 0.7f;
        for (float wj : w) {
            d.x.push_back(static_cast<float>(rng.normal()));
            y += wj * d.x.back();
        }
        d.targets.push_back(y + static_cast<float>(0.01 * rng.normal()));
    }
    auto m = models::linear_regression(4);
    ParamVector p(m->parameter_count()), g(m->parameter_count());
    m->init(p, 2);
    for (int step = 0; step < 300; ++step) {
        m->loss_and_gradient(p, batch(d, (step * 20) % 380, 20), g);
        for (std::size_t i = 0; i < p.size(); ++i) p[i] -= 0.05f * g[i];
    }
    CHECK(m->evaluate(p, d).loss < 1e-3);
    CHECK(p[0] == doctest::Approx(1.5).epsilon(0.02));
    CHECK(p[4] == doctest::Approx(0.7).epsilon(0.02));  // the bias
}
