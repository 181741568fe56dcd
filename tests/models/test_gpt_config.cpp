// The GPT's layout, init and description, and its config entry: every mistake one line at its
// JSON path.

#include <doctest/doctest.h>

#include <cmath>

#include "gossamer/core/json.hpp"
#include "gossamer/core/models.hpp"
#include "gossamer/core/params.hpp"
#include "gossamer/core/text.hpp"
#include "gpt_util.hpp"

using namespace gossamer;

namespace {

// A data shape of text windows: 63 characters (the KJV's count), windows of context + 1.
models::DataShape text(int context = 64, std::string vocabulary = "") {
    if (vocabulary.empty())
        for (int i = 0; i < 63; ++i) vocabulary.push_back(static_cast<char>(' ' + i));
    const int v = static_cast<int>(vocabulary.size());
    return {"bible-kjv/train", context + 1, v, 1, 0, 0, vocabulary};
}

std::unique_ptr<Model> build(const std::string& model_json, const models::DataShape& data) {
    auto doc = json::parse_text(R"({"model": )" + model_json + "}", "train.json");
    return models::make_model(json::Node(doc).at("model"), data);
}

void expect_error(const std::string& model_json, const models::DataShape& data,
                  const std::string& path, const std::string& text) {
    CAPTURE(model_json);
    try {
        build(model_json, data);
        FAIL("no error");
    } catch (const ConfigError& e) {
        CHECK(e.file() == "train.json");
        CHECK(e.path() == path);
        const std::string what = e.what();
        CAPTURE(what);
        CHECK(what.find(text) != std::string::npos);
        CHECK(what.find('\n') == std::string::npos);
    }
}

double stddev(const float* w, std::size_t n) {
    double s = 0, s2 = 0;
    for (std::size_t i = 0; i < n; ++i) s += w[i], s2 += static_cast<double>(w[i]) * w[i];
    const double mean = s / static_cast<double>(n);
    return std::sqrt(s2 / static_cast<double>(n) - mean * mean);
}

}  // namespace

TEST_CASE("gpt layout: the tensors of models.hpp, in order, and the layers over them") {
    auto spec = test_gpt::make_spec(63);
    spec.digest = "1a2b3c4d";
    auto m = models::gpt(spec);
    // 127 x 128 embeddings, 2 blocks of 12 W^2 + 13 W, head 2 W + 63 W + 63.
    CHECK(m->parameter_count() == 16256 + 2 * 198272 + 8383);
    CHECK(m->describe() == "gpt L2 H4 W128 T64 vocab 63 #1a2b3c4d (421183 parameters)");
    CHECK(m->name() == "gpt");
    CHECK(m->input_features() == 65);
    CHECK(m->classes() == 63);
    CHECK(m->context() == 64);
    CHECK(m->vocabulary_size() == 63);
    const auto t = test_gpt::tensors(spec);
    const auto layers = m->layers();
    REQUIRE(layers.size() == 4);
    CHECK(layers[0].offset == 0);
    CHECK(layers[0].size == t[2].offset);  // wte, wpe
    CHECK(layers[1].offset == t[2].offset);
    CHECK(layers[2].offset == t[14].offset);
    CHECK(layers[3].offset == t[26].offset);
    CHECK(t[26].name == "lnf.weight");
    auto lab = models::gpt(test_gpt::make_spec(63, 64, 4, 4, 192));
    CHECK(lab->parameter_count() == 1816383);
    CHECK(lab->describe() == "gpt L4 H4 W192 T64 vocab 63 (1816383 parameters)");
}

TEST_CASE("gpt init: GPT-2's scales, ones and zeros, deterministic for a seed") {
    const auto spec = test_gpt::make_spec(63);
    auto m = models::gpt(spec);
    ParamVector p(m->parameter_count()), q(m->parameter_count());
    m->init(p, 5);
    m->init(q, 5);
    CHECK(bitwise_equal(p, q));
    m->init(q, 6);
    CHECK(!bitwise_equal(p, q));
    for (const auto& t : test_gpt::tensors(spec)) {
        INFO(t.name);
        const float* w = p.data() + t.offset;
        const bool bias = t.name.ends_with("bias");
        const bool ln = t.name.find("ln") != std::string::npos;
        if (bias) {
            CHECK(std::all_of(w, w + t.size, [](float v) { return v == 0.0f; }));
        } else if (ln) {
            CHECK(std::all_of(w, w + t.size, [](float v) { return v == 1.0f; }));
        } else {
            const bool proj = t.name.find("proj.weight") != std::string::npos;
            const double want = proj ? 0.02 / std::sqrt(4.0) : 0.02;
            CHECK(stddev(w, t.size) == doctest::Approx(want).epsilon(0.05));
        }
    }
    CHECK_THROWS_AS(m->init(std::span(p.data(), 10), 1), Error);
}

TEST_CASE("gpt constructor refuses sizes out of range") {
    CHECK_THROWS_WITH_AS(models::gpt(test_gpt::make_spec(1)),
                         "gpt: vocabulary of 1; need at least 2", Error);
    CHECK_THROWS_WITH_AS(models::gpt(test_gpt::make_spec(5, 64, 2, 3)),
                         "gpt: 3 heads do not divide width 128", Error);
    CHECK_THROWS_AS(models::gpt(test_gpt::make_spec(5, 64, 0)), Error);
    CHECK_THROWS_AS(models::gpt(test_gpt::make_spec(5, 0)), Error);
}

TEST_CASE("make_model builds the gpt from text data and names the vocabulary's digest") {
    const auto d = text();
    auto m = build(R"({"name": "gpt"})", d);
    CHECK(m->describe() == "gpt L2 H4 W128 T64 vocab 63 #" + vocabulary_digest(d.vocabulary) +
                               " (421183 parameters)");
    CHECK(vocabulary_digest(d.vocabulary).size() == 8);
    auto lab = build(R"({"name": "gpt", "layers": 4, "heads": 4, "width": 192, "context": 32,
                         "input": 33})",
                     text(32));
    CHECK(lab->input_features() == 33);
    CHECK(dynamic_cast<models::LanguageModel*>(lab.get())->context() == 32);
    CHECK(models::model_names().at(4) == "gpt");  // the built-ins come first
}

TEST_CASE("make_model sizes the gpt from text windows, which it then trains on") {
    const std::string text = "In the beginning God created the heaven and the earth.\n";
    const Dataset d = text_windows(text, vocabulary_of(text), 8, 4, "text");
    auto m = build(R"({"name": "gpt", "layers": 1, "heads": 2, "width": 16, "context": 8})",
                   models::shape_of(d));
    CHECK(m->classes() == static_cast<int>(d.vocabulary.size()));
    CHECK(m->input_features() == 9);
    ParamVector p(m->parameter_count()), g(m->parameter_count());
    m->init(p, 1);
    const Batch b{static_cast<int>(d.size()), d.features, d.x.data(), d.labels.data(), nullptr};
    const double loss = m->loss_and_gradient(p, b, g);
    // At init the logits are nearly uniform: the loss is close to ln(vocabulary).
    CHECK(loss ==
          doctest::Approx(std::log(static_cast<double>(d.vocabulary.size()))).epsilon(0.05));
    CHECK(m->evaluate(p, d).loss == doctest::Approx(loss).epsilon(1e-5));
}

TEST_CASE("make_model refuses bad gpt configs with one line at the JSON path") {
    const auto d = text();
    expect_error(R"({"name": "gpt", "heads": 3})", d, "model.heads",
                 "model.heads: 3 heads do not divide width 128; use a divisor such as 4");
    expect_error(R"({"name": "gpt", "width": 100, "heads": 8})", d, "model.heads",
                 "8 heads do not divide width 100; use a divisor such as 10");
    expect_error(R"({"name": "gpt", "width": 130})", d, "model.width",
                 "width 130 is not a multiple of the default 4 heads");
    models::DataShape images{"fashion-mnist/train", 784, 10, 1, 28, 28, ""};
    expect_error(R"({"name": "gpt"})", images, "model.name",
                 "\"gpt\" needs text data with a vocabulary, but data set 'fashion-mnist/train' "
                 "has none; use \"data\": {\"name\": \"bible-kjv\"}");
    expect_error(R"({"name": "gpt", "context": 32})", d, "model.context",
                 "context 32 needs windows of 33 characters, but data set 'bible-kjv/train' has "
                 "65 per sample (windows built for context 64)");
    expect_error(R"({"name": "gpt"})", text(16), "model.name", "windows built for context 16");
    expect_error(R"({"name": "gpt", "context": 1})", text(1, "a"), "model.name",
                 "has a vocabulary of 1 character; a language model needs at least 2");
    expect_error(R"({"name": "gpt", "layers": 0})", d, "model.layers",
                 "layer count 0 must be positive");
    expect_error(R"({"name": "gpt", "width": 100000})", d, "model.width",
                 "width 100000 is out of range; use 1 to 8192");
    expect_error(R"({"name": "gpt", "heads": 2.5})", d, "model.heads", "expected an integer");
    expect_error(R"({"name": "gpt", "layer": 2})", d, "model.layer", "did you mean \"layers\"");
    expect_error(R"({"name": "gpt", "input": 64})", d, "model.input",
                 "input 64 does not match data set 'bible-kjv/train', which has 65 features");
}
