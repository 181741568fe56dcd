// A GPT on a small text file, as a user runs it: train shows nats and bits per character, eval
// gives back the same loss, sample continues a prompt (the same text for a seed, greedy at
// temperature 0), and each bad input is one line and exit 2: a prompt character outside the
// vocabulary, a model file trained on another vocabulary (even one of the same size).
#include <doctest/doctest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "support/run.hpp"
#include "support/temp_dir.hpp"

using gossamer::test::run;
using gossamer::test::RunResult;
using gossamer::test::TempDir;
using Json = nlohmann::json;

namespace {

const std::string kBin = GOSSAMER_BINARY;

// About 6 kB of lower-case prose: vocabulary ' ', '.', '\n' and the letters used.
std::string prose(const std::string& line) {
    std::string t;
    for (int i = 0; i < 60; ++i) t += line + "\n";
    return t;
}

std::string config(const TempDir& dir, const std::string& text, const std::string& out) {
    return R"({"seed": 1, "data": {"name": "text", "file": ")" + text + R"("},
        "model": {"name": "gpt", "layers": 1, "heads": 2, "width": 16, "context": 16},
        "optimizer": {"name": "adamw", "lr": 0.01, "clip_norm": 1},
        "training": {"epochs": 1, "batch_size": 8, "target_loss": 100},
        "output": {"dir": ")" +
           (dir.path() / out).string() + R"("}})";
}

void check_one_line(const RunResult& r, const std::string& says) {
    CAPTURE(r.err);
    CHECK(r.status == 2);
    CHECK(r.err.rfind("error: ", 0) == 0);
    CHECK(r.err.find('\n') == r.err.size() - 1);
    CHECK(r.err.find(says) != std::string::npos);
    CHECK(r.out.empty());
}

}  // namespace

TEST_CASE("a gpt on text: nats and bits per character in train and eval, and sample") {
    TempDir dir;
    const auto text = dir.write("t.txt", prose("the quick brown fox jumps over the lazy dog. "
                                               "a cat sat on the mat"));
    const auto cfg = dir.write("c.json", config(dir, text, "out"));
    auto t = run(kBin + " train --json --config " + cfg);
    CAPTURE(t.err);
    REQUIRE(t.status == 0);
    const auto trained = Json::parse(t.out);
    const double loss = trained["test_loss"].get<double>();
    CHECK(trained["test_bpc"].get<double>() == doctest::Approx(loss / std::log(2.0)));
    CHECK(trained["target_loss"]["step"].is_number());    // at most 100: the first evaluation
    CHECK(t.err.find("nats/char") != std::string::npos);  // the evaluation's progress line
    auto table = run(kBin + " train --config " + cfg);
    REQUIRE(table.status == 0);
    CHECK(table.out.find("nats/char") != std::string::npos);
    CHECK(table.out.find("bpc") != std::string::npos);
    CHECK(table.out.find("test_accuracy") == std::string::npos);

    const auto model = (dir.path() / "out/model.bin").string();
    auto e = run(kBin + " eval --json --model " + model + " --config " + cfg);
    CAPTURE(e.err);
    REQUIRE(e.status == 0);
    const auto ej = Json::parse(e.out);
    CHECK(ej["test_loss"].get<double>() == loss);
    CHECK(ej["test_nats_per_char"].get<double>() == loss);
    CHECK(ej["test_bpc"].get<double>() == doctest::Approx(loss / std::log(2.0)));
    auto et = run(kBin + " eval --model " + model + " --config " + cfg);
    REQUIRE(et.status == 0);
    CHECK(et.out.find("bpc") != std::string::npos);

    const std::string sample = kBin + " sample --model " + model + " --config " + cfg;
    auto s1 = run(sample + " --prompt 'the ' --chars 40 --seed 3 --json");
    CAPTURE(s1.err);
    REQUIRE(s1.status == 0);
    const auto j1 = Json::parse(s1.out);
    const auto cont = j1["continuation"].get<std::string>();
    CHECK(cont.size() == 40);
    CHECK(cont.find_first_not_of("abcdefghijklmnopqrstuvwxyz .\n") == std::string::npos);
    CHECK(run(sample + " --prompt 'the ' --chars 40 --seed 3 --json").out == s1.out);
    auto plain = run(sample + " --prompt 'the ' --chars 40 --seed 3");
    REQUIRE(plain.status == 0);
    CHECK(plain.out == "the " + cont + "\n");
    // Greedy ignores the seed; a prompt longer than the context slides.
    const std::string long_prompt(40, 'a');
    auto g1 = run(sample + " --prompt " + long_prompt + " --chars 30 --temperature 0 --seed 1");
    auto g2 = run(sample + " --prompt " + long_prompt + " --chars 30 --temperature 0 --seed 2");
    REQUIRE(g1.status == 0);
    CHECK(g1.out == g2.out);

    check_one_line(run(sample + " --prompt 'the Fox'"),
                   "--prompt: character 'F' at position 4 is not in the model's vocabulary");
    check_one_line(run(sample + " --prompt 'the fox' --temperature -1"), "--temperature");
}

TEST_CASE("eval and sample refuse a model file trained on another vocabulary, in one line") {
    TempDir dir;
    // The same number of distinct characters ('1' for 'y'): the same parameter count.
    const auto a = dir.write("a.txt", prose("the quick brown fox jumps over the lazy dog"));
    const auto b = dir.write("b.txt", prose("the quick brown fox jumps over the laz1 dog"));
    const auto c = dir.write("c.txt", prose("the quick brown fox"));  // fewer characters
    const auto cfg_a = dir.write("a.json", config(dir, a, "oa"));
    const auto cfg_b = dir.write("b.json", config(dir, b, "ob"));
    const auto cfg_c = dir.write("c.json", config(dir, c, "oc"));
    REQUIRE(run(kBin + " train --config " + cfg_a).status == 0);
    const auto model = (dir.path() / "oa/model.bin").string();
    for (const auto& cfg : {cfg_b, cfg_c}) {
        CAPTURE(cfg);
        check_one_line(run(kBin + " eval --model " + model + " --config " + cfg),
                       "the model file was trained on another vocabulary");
        check_one_line(run(kBin + " sample --prompt the --model " + model + " --config " + cfg),
                       "the model file was trained on another vocabulary");
    }
}
