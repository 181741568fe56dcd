// The text data sections of a training config ("bible-kjv", "text"): the model's context sizes
// the windows, the last 10% is the validation split; bad sections name their key.
#include <doctest/doctest.h>

#include <string>

#include "gossamer/core/text.hpp"
#include "gossamer/optimizers/local/training_config.hpp"
#include "support/errors.hpp"
#include "support/temp_dir.hpp"

using namespace gossamer;
using gossamer::test::config_error;
using gossamer::test::contains;

namespace {
optim::TrainingConfig text_config(const std::string& data, const std::string& model) {
    return optim::parse_training_config(
        json::parse_text(R"({"data": )" + data + R"(, "model": )" + model +
                             R"(, "optimizer": {"name": "adamw", "lr": 0.001, "clip_norm": 1}})",
                         "t.json"));
}
}  // namespace

TEST_CASE("text: a training config reads a file, splits off the last 10% and sizes the windows") {
    test::TempDir dir;
    std::string text;
    for (int i = 0; i < 100; ++i) text += "the quick brown fox jumps over the lazy dog\n";
    const auto file = dir.write("t.txt", text);  // 4,400 characters
    const auto c = text_config(R"({"name": "text", "file": ")" + file + R"("})",
                               R"({"name": "gpt", "context": 16})");
    CHECK(c.data.context == 16);
    CHECK(c.data.stride == 16);
    CHECK(c.optimizer.clip_norm == 1.0);
    const auto d = optim::load_training_data(c);
    CHECK(d.train.features == 17);
    CHECK(d.train.vocabulary == vocabulary_of(text));
    CHECK(d.train.size() == (3960 - 17) / 16 + 1);
    CHECK(d.test.size() == (440 - 17) / 16 + 1);
    CHECK(d.test.name == "text/validation");
    // The validation split is the text's end: its first window starts at character 3,960.
    CHECK(d.test.x[0] == static_cast<float>(d.test.vocabulary.find(text[3960])));

    const auto limited =
        text_config(R"({"name": "text", "file": ")" + file + R"(", "chars": 1000, "stride": 4})",
                    R"({"name": "gpt", "context": 8})");
    CHECK(optim::load_training_data(limited).train.size() == (900 - 9) / 4 + 1);

    // A context longer than the validation split: one line at model.context.
    const auto wide = text_config(R"({"name": "text", "file": ")" + file + R"(", "chars": 500})",
                                  R"({"name": "gpt", "context": 64})");
    const auto e = config_error([&] { optim::load_training_data(wide); });
    CHECK(contains(e, "model.context"));
    CHECK(contains(e, "context 64 needs windows of 65 characters"));
    CHECK(contains(e, "use a context of at most 49"));
}

TEST_CASE("text: bad data sections name their key") {
    CHECK(contains(config_error([] { text_config(R"({"name": "text"})", R"({"name": "gpt"})"); }),
                   "missing key \"file\""));
    CHECK(contains(config_error([] {
                       text_config(R"({"name": "bible-kjv", "file": "x"})", R"({"name": "gpt"})");
                   }),
                   "data.file"));
    CHECK(contains(config_error([] {
                       text_config(R"({"name": "bible-kjv", "stride": 0})", R"({"name": "gpt"})");
                   }),
                   "data.stride"));
    CHECK(contains(config_error([] {
                       text_config(R"({"name": "bible-kjv"})", R"({"name": "gpt", "context": 0})");
                   }),
                   "model.context"));
    CHECK(contains(config_error([] {
                       optim::parse_training_config(json::parse_text(
                           R"({"data": {"name": "bible-kjv"}, "model": {"name": "gpt"},
                               "optimizer": {"name": "sgd", "lr": 1, "clip_norm": -1}})",
                           "t.json"));
                   }),
                   "optimizer.clip_norm"));
}

TEST_CASE("text: the shipped GPT configs parse, each sized for its model's context") {
    const std::string root = std::string(GOSSAMER_SOURCE_DIR) + "/examples/";
    for (const char* name : {"train/gpt_tiny.json", "launch/gpt_tiny8.json", "sim/gpt_tiny16.json",
                             "lab/gpt_lab8.json"}) {
        CAPTURE(name);
        const auto c = optim::load_training_config(root + name);
        CHECK(c.data.name == "bible-kjv");
        CHECK(c.data.context == 64);
        CHECK(c.optimizer.clip_norm == 1.0);
        CHECK(c.target_loss.has_value());
    }
}
