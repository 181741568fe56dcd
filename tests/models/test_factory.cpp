// make_model: configs that build, and every mistake as a ConfigError at its JSON path.

#include <doctest/doctest.h>

#include "gossamer/core/json.hpp"
#include "gossamer/core/models.hpp"

using namespace gossamer;

namespace {

models::DataShape fashion() {
    return {"fashion-mnist/train", 784, 10, 1, 28, 28, ""};
}
models::DataShape flat() {
    return {"logreg-synthetic", 20, 2, 1, 0, 0, ""};
}
models::DataShape regression() {
    return {"lsq-synthetic", 20, 0, 1, 0, 0, ""};
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
        CAPTURE(e.what());
        CHECK(std::string(e.what()).find(text) != std::string::npos);
    }
}

}  // namespace

TEST_CASE("make_model builds every built-in model sized by the data") {
    CHECK(build(R"({"name": "mlp", "hidden": [256, 128]})", fashion())->describe() ==
          "mlp 784-256-128-10 (235146 parameters)");
    CHECK(build(R"({"name": "mlp"})", fashion())->parameter_count() == 235146);
    CHECK(build(R"({"name": "mlp", "hidden": [], "input": 784})", fashion())->layers().size() == 1);
    CHECK(build(R"({"name": "softmax"})", flat())->describe() == "softmax 20-2 (42 parameters)");
    CHECK(build(R"({"name": "linear"})", regression())->classes() == 0);
    auto c = build(R"({"name": "cnn", "channels": [16, 32], "kernel": 5, "input": [1, 28, 28]})",
                   fashion());
    CHECK(c->parameter_count() == 28938);
    CHECK(build(R"({"name": "cnn", "channels": [8], "kernel": 3})", fashion())->layers().size() ==
          2);
}

TEST_CASE("make_model rejects bad configs with the JSON path and a fix") {
    expect_error(R"({"name": "mpl"})", fashion(), "model.name",
                 "unknown model \"mpl\"; did you mean \"mlp\"? models: softmax, linear, mlp, cnn");
    expect_error(R"({"name": "transformer"})", fashion(), "model.name", "models: softmax");
    expect_error(R"({"hidden": [3]})", fashion(), "model", "missing key \"name\"");
    expect_error(R"("mlp")", fashion(), "model", "expected a model object");
    expect_error(R"({"name": "mlp", "hiden": [3]})", fashion(), "model.hiden",
                 "did you mean \"hidden\"");
    expect_error(R"({"name": "mlp", "hidden": [256, 0]})", fashion(), "model.hidden[1]",
                 "hidden layer size 0 must be positive");
    expect_error(R"({"name": "mlp", "hidden": [-5]})", fashion(), "model.hidden[0]",
                 "must be positive");
    expect_error(R"({"name": "mlp", "hidden": [2.5]})", fashion(), "model.hidden[0]",
                 "expected an integer");
    expect_error(R"({"name": "mlp", "input": 100})", flat(), "model.input",
                 "input 100 does not match data set 'logreg-synthetic', which has 20 features "
                 "per sample; set \"input\": 20 or remove it");
    expect_error(R"({"name": "softmax", "input": 0})", flat(), "model.input", "must be positive");
    expect_error(R"({"name": "cnn"})", flat(), "model.name",
                 "\"cnn\" needs images, but data set 'logreg-synthetic' has flat samples");
    expect_error(R"({"name": "cnn", "input": [1, 32, 32]})", fashion(), "model.input",
                 "input 1x32x32 does not match data set 'fashion-mnist/train', whose images are "
                 "1x28x28");
    expect_error(R"({"name": "cnn", "kernel": 4})", fashion(), "model.kernel",
                 "kernel size 4 is even");
    expect_error(R"({"name": "cnn", "channels": [16, 0]})", fashion(), "model.channels[1]",
                 "channel count 0 must be positive");
    expect_error(R"({"name": "cnn", "channels": [4, 4, 4, 4, 4]})", fashion(), "model.channels",
                 "5 stages of 2x2 pooling shrink the 28x28 images");
    expect_error(R"({"name": "cnn", "channels": []})", fashion(), "model.channels",
                 "at least 1 element");
    expect_error(R"({"name": "linear"})", fashion(), "model.name",
                 "\"linear\" fits regression targets");
    expect_error(R"({"name": "softmax"})", regression(), "model.name",
                 "\"softmax\" is a classifier, but data set 'lsq-synthetic' has regression "
                 "targets");
    expect_error(R"({"name": "mlp"})", {"empty", 0, 0, 1, 0, 0, ""}, "model", "no features");
}

namespace {

// A user model: softmax regression without a bias, written against the public interface only.
class NoBias final : public Model {
  public:
    explicit NoBias(int features, int classes)
        : features_(features),
          classes_(classes),
          inner_(models::softmax_regression(features, classes)) {
        layers_ = {{"w", 0, static_cast<std::size_t>(features) * classes}};
    }
    std::string name() const override { return "nobias"; }
    std::string describe() const override { return "nobias"; }
    std::size_t parameter_count() const override { return layers_[0].size; }
    std::span<const Layer> layers() const override { return layers_; }
    int input_features() const override { return features_; }
    int classes() const override { return classes_; }
    void init(std::span<float> p, std::uint64_t) const override {
        for (float& v : p) v = 0.0f;
    }
    double loss_and_gradient(std::span<const float> p, const Batch& b, std::span<float> g,
                             const LayerMask& need) override {
        check_batch(p, b);
        std::vector<float> full(p.begin(), p.end()), fg(full.size() + classes_);
        full.resize(full.size() + classes_, 0.0f);
        const double loss = inner_->loss_and_gradient(full, b, fg, need);
        if (need.needs(0)) std::copy_n(fg.begin(), p.size(), g.begin());
        return loss;
    }
    BatchStats forward(std::span<const float> p, const Batch& b) override {
        std::vector<float> full(p.begin(), p.end());
        full.resize(full.size() + classes_, 0.0f);
        return inner_->forward(full, b);
    }
    std::unique_ptr<Model> clone() const override {
        return std::make_unique<NoBias>(features_, classes_);
    }

  private:
    int features_, classes_;
    std::unique_ptr<Model> inner_;
    std::vector<Layer> layers_;
};

}  // namespace

TEST_CASE("register_model plugs a user model into make_model") {
    models::register_model("nobias", [](const json::Node& node, const models::DataShape& d) {
        node.expect_object({"name"});
        return std::make_unique<NoBias>(d.features, d.classes);
    });
    auto m = build(R"({"name": "nobias"})", flat());
    CHECK(m->name() == "nobias");
    CHECK(m->parameter_count() == 40);
    CHECK(models::model_names().back() == "nobias");
    CHECK_THROWS_AS(models::register_model("nobias",
                                           [](const json::Node&, const models::DataShape&) {
                                               return std::unique_ptr<Model>();
                                           }),
                    Error);
    CHECK_THROWS_AS(models::register_model("mlp",
                                           [](const json::Node&, const models::DataShape&) {
                                               return std::unique_ptr<Model>();
                                           }),
                    Error);
    expect_error(R"({"name": "nobias", "depth": 2})", flat(), "model.depth", "unknown key");
    expect_error(R"({"name": "nobia"})", flat(), "model.name", "did you mean \"nobias\"");
}
