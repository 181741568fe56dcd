// The GPT: gradients against central finite differences for every tensor, causality, the early
// stop of the backward pass (LayerMask), next_logits, clone independence.

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "gossamer/core/models.hpp"
#include "gossamer/core/params.hpp"
#include "gpt_util.hpp"
#include "model_util.hpp"

using namespace gossamer;
using test_gpt::tensors;
using test_gpt::tiny;
using test_gpt::windows;

namespace {

// Central differences (f(x + h) - f(x - h)) / 2h with Richardson's extrapolation from h and h/2,
// which cancels the h^2 term: the model is smooth (no ReLU), so a fairly large h keeps float
// rounding (a few 1e-7 on the loss, divided by h) far below the 1e-3 asked for.
std::vector<double> numeric_gradient(Model& m, const ParamVector& params, const Batch& b,
                                     double h) {
    ParamVector p = params;
    const auto none = LayerMask::none();
    auto diff = [&](std::size_t i, double step) {
        p[i] = static_cast<float>(params[i] + step);
        const double fp = m.loss_and_gradient(p, b, {}, none);
        p[i] = static_cast<float>(params[i] - step);
        const double fm = m.loss_and_gradient(p, b, {}, none);
        p[i] = params[i];
        // The step really taken in float.
        return (fp - fm) / (static_cast<double>(static_cast<float>(params[i] + step)) -
                            static_cast<double>(static_cast<float>(params[i] - step)));
    };
    std::vector<double> out(p.size());
    for (std::size_t i = 0; i < p.size(); ++i) out[i] = (4 * diff(i, h / 2) - diff(i, h)) / 3;
    return out;
}

// |a - n| / |n| over one tensor (Euclidean norms).
double relative_error(const float* a, const double* n, std::size_t size, double scale = 1) {
    double diff = 0, norm = 0;
    for (std::size_t i = 0; i < size; ++i) {
        diff += (a[i] * scale - n[i]) * (a[i] * scale - n[i]);
        norm += n[i] * n[i];
    }
    return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
}

}  // namespace

TEST_CASE("gpt gradient equals central finite differences on every tensor (relative 1e-3)") {
    const auto spec = tiny();
    auto m = models::gpt(spec);
    REQUIRE(m->parameter_count() == tensors(spec).back().offset + tensors(spec).back().size);
    const auto params = test_models::noisy_init(*m, 3);
    const auto w = windows(spec, 3, 17);
    ParamVector grad(m->parameter_count());
    const double loss = m->loss_and_gradient(params, w.batch(), grad);
    CHECK(std::isfinite(loss));
    const auto numeric = numeric_gradient(*m, params, w.batch(), 1.0 / 64);
    for (const auto& t : tensors(spec)) {
        const double rel =
            relative_error(grad.data() + t.offset, numeric.data() + t.offset, t.size);
        INFO(t.name, ": relative error ", rel);
        CHECK(rel < 1e-3);
        // Each coordinate too, above float's noise floor.
        for (std::size_t i = t.offset; i < t.offset + t.size; ++i) {
            const double a = grad[i], n = numeric[i];
            if (std::abs(a - n) > 1e-5 + 1e-3 * std::max(std::abs(a), std::abs(n))) {
                INFO("coordinate ", i, ": analytic ", a, ", numeric ", n);
                CHECK(false);
                break;
            }
        }
    }
    // The check can fail: a gradient 1% off is caught.
    const auto qkv = tensors(spec)[4];
    REQUIRE(qkv.name == "block1.attn.qkv.weight");
    CHECK(relative_error(grad.data() + qkv.offset, numeric.data() + qkv.offset, qkv.size, 1.01) >
          1e-3);
}

TEST_CASE("gpt is causal: the loss is the mean of the per-position losses of every prefix") {
    // next_logits on a prefix sees no later token; if forward() let a position attend to a later
    // one, its loss would differ from the one computed from the prefixes alone.
    const auto spec = tiny();
    auto m = models::gpt(spec);
    const auto params = test_models::noisy_init(*m, 5);
    const auto w = windows(spec, 4, 23);
    double expected = 0;
    std::int64_t correct = 0;
    std::vector<float> z(spec.vocab);
    for (int i = 0; i < w.n; ++i) {
        const auto ids = w.ids(i);
        for (int t = 1; t <= spec.context; ++t) {
            m->next_logits(params, std::span(ids).first(t), z);
            double sum = 0;
            const float mx = *std::max_element(z.begin(), z.end());
            for (float v : z) sum += std::exp(static_cast<double>(v - mx));
            expected += (std::log(sum) - (z[ids[t]] - mx)) / spec.context;
            if (t == spec.context)
                correct += std::max_element(z.begin(), z.end()) - z.begin() == ids[t] ? 1 : 0;
        }
    }
    const BatchStats s = m->forward(params, w.batch());
    CHECK(s.loss_sum == doctest::Approx(expected).epsilon(1e-5));
    CHECK(s.correct == correct);
    // The last position does read its own token and the earlier ones.
    auto ids = w.ids(0);
    std::vector<float> a(spec.vocab), b(spec.vocab), c(spec.vocab);
    m->next_logits(params, std::span(ids).first(spec.context), a);
    ids[spec.context - 1] = (ids[spec.context - 1] + 1) % spec.vocab;
    m->next_logits(params, std::span(ids).first(spec.context), b);
    ids[0] = (ids[0] + 1) % spec.vocab;
    m->next_logits(params, std::span(ids).first(spec.context), c);
    CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) != 0);
    CHECK(std::memcmp(b.data(), c.data(), b.size() * sizeof(float)) != 0);
}

TEST_CASE("gpt LayerMask: needed layers get the full pass's gradient, others stay untouched") {
    const auto spec = tiny();
    auto m = models::gpt(spec);
    const auto layers = m->layers();
    REQUIRE(layers.size() == 4);
    CHECK(layers[0].name == "embed");
    CHECK(layers[1].name == "block1");
    CHECK(layers[3].name == "head");
    const auto params = test_models::noisy_init(*m, 7);
    const auto w = windows(spec, 3, 29);
    ParamVector full(m->parameter_count());
    const double loss = m->loss_and_gradient(params, w.batch(), full);
    auto check_mask = [&](const LayerMask& need) {
        ParamVector g(m->parameter_count());
        for (std::size_t i = 0; i < g.size(); ++i) g[i] = 7.0f;
        auto before =
            std::vector<std::uint64_t>(m->backward_macs().begin(), m->backward_macs().end());
        CHECK(m->loss_and_gradient(params, w.batch(), g, need) == loss);
        for (std::size_t l = 0; l < layers.size(); ++l) {
            INFO("layer ", layers[l].name);
            const auto* a = g.data() + layers[l].offset;
            if (need.needs(l)) {
                CHECK(std::memcmp(a, full.data() + layers[l].offset,
                                  layers[l].size * sizeof(float)) == 0);
            } else {
                CHECK(std::all_of(a, a + layers[l].size, [](float v) { return v == 7.0f; }));
            }
        }
        std::vector<std::uint64_t> done;
        for (std::size_t l = 0; l < layers.size(); ++l)
            done.push_back(m->backward_macs()[l] - before[l]);
        return done;
    };
    const auto all = check_mask(LayerMask::all());
    for (auto v : all) CHECK(v > 0);
    const auto top = check_mask(LayerMask::from(3));
    CHECK(top[0] == 0);
    CHECK(top[1] == 0);
    CHECK(top[2] == 0);
    CHECK(top[3] == all[3]);  // only LayerNorm's input gradient is skipped, no product
    const auto upper = check_mask(LayerMask::from(2));
    CHECK(upper[0] == 0);
    CHECK(upper[1] == 0);
    CHECK(upper[2] == all[2]);
    check_mask(LayerMask::only({false, true, false, false}));  // through head and block2
    const auto embed = check_mask(LayerMask::only({true}));
    CHECK(embed[2] < all[2]);  // block2 only back-propagated, no weight gradient
    check_mask(LayerMask::none());
}

TEST_CASE("gpt next_logits equals the logits of the last position, and checks its input") {
    const auto spec = tiny();
    auto m = models::gpt(spec);
    const auto params = test_models::noisy_init(*m, 9);
    // A window whose last token is the arg-max of next_logits is counted correct by forward().
    auto w = windows(spec, 1, 31);
    auto ids = w.ids(0);
    std::vector<float> z(spec.vocab);
    m->next_logits(params, std::span(ids).first(spec.context), z);
    const auto best = static_cast<float>(std::max_element(z.begin(), z.end()) - z.begin());
    w.x.back() = best;
    CHECK(m->forward(params, w.batch()).correct == 1);
    w.x.back() = static_cast<float>((static_cast<int>(best) + 1) % spec.vocab);
    CHECK(m->forward(params, w.batch()).correct == 0);
    std::vector<std::int32_t> none, longer(spec.context + 1, 0), bad = {1, 7};
    CHECK_THROWS_AS(m->next_logits(params, none, z), Error);
    CHECK_THROWS_AS(m->next_logits(params, longer, z), Error);
    CHECK_THROWS_WITH_AS(m->next_logits(params, bad, z),
                         "gpt: token 7 at position 1 is outside [0, 7)", Error);
    w.x[2] = 2.5f;
    CHECK_THROWS_AS(m->forward(params, w.batch()), Error);
    w.x[2] = -1.0f;
    CHECK_THROWS_AS(m->forward(params, w.batch()), Error);
}

TEST_CASE("gpt clones are independent and give the same results") {
    const auto spec = tiny();
    auto m = models::gpt(spec);
    auto c = m->clone();
    CHECK(c->describe() == m->describe());
    const auto params = test_models::noisy_init(*m, 11);
    const auto a = windows(spec, 3, 37), b = windows(spec, 2, 41);
    ParamVector g1(m->parameter_count()), g2(m->parameter_count()), g3(m->parameter_count());
    const double la = m->loss_and_gradient(params, a.batch(), g1);
    CHECK(c->loss_and_gradient(params, b.batch(), g2) != la);
    // The original's scratch was not disturbed by the clone: the same call gives the same bits.
    CHECK(m->loss_and_gradient(params, a.batch(), g3) == la);
    CHECK(std::memcmp(g1.data(), g3.data(), g1.size() * sizeof(float)) == 0);
    CHECK(c->loss_and_gradient(params, a.batch(), g2) == la);
    CHECK(std::memcmp(g1.data(), g2.data(), g1.size() * sizeof(float)) == 0);
}

TEST_CASE("gpt forward over a batch larger than its chunk equals the samples one by one") {
    const auto spec = tiny();  // context 5: chunks of 819 samples
    auto m = models::gpt(spec);
    const auto params = test_models::noisy_init(*m, 13);
    const auto w = windows(spec, 1000, 43);
    const BatchStats all = m->forward(params, w.batch());
    double sum = 0;
    std::int64_t correct = 0;
    for (int i = 0; i < w.n; ++i) {
        Batch one = w.batch();
        one.size = 1;
        one.x += static_cast<std::size_t>(i) * w.features;
        one.labels += i;
        const BatchStats s = m->forward(params, one);
        sum += s.loss_sum;
        correct += s.correct;
    }
    CHECK(all.loss_sum == doctest::Approx(sum).epsilon(1e-6));
    CHECK(all.correct == correct);
    CHECK(correct > 0);
    // evaluate() agrees, in batches of any size.
    Dataset d;
    d.features = w.features;
    d.classes = spec.vocab;
    d.x = w.x;
    d.labels = w.labels;
    const EvalResult e = m->evaluate(params, d, 300);
    CHECK(e.samples == 1000);
    CHECK(e.loss == doctest::Approx(sum / 1000).epsilon(1e-6));
}
