// gossamer sample as a user runs it: bad input is one line and exit 2 (the text generation itself
// is tested in tests/optimizers/local/test_text_sample.cpp, and end to end on a GPT below).
#include <doctest/doctest.h>

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

void check_one_line(const RunResult& r, const std::string& says) {
    CAPTURE(r.err);
    CHECK(r.status == 2);
    CHECK(r.err.rfind("error: ", 0) == 0);
    CHECK(r.err.find('\n') == r.err.size() - 1);
    CHECK(r.err.find(says) != std::string::npos);
    CHECK(r.out.empty());
}

}  // namespace

TEST_CASE("sample refuses a model that is not a language model, and bad options, in one line") {
    TempDir dir;
    const auto config = dir.write("c.json", R"({"seed": 3,
        "data": {"name": "logreg_synthetic", "samples": 200, "test_samples": 50, "features": 4, "seed": 5},
        "model": {"name": "mlp", "hidden": [4]}, "optimizer": {"name": "sgd", "lr": 0.2},
        "training": {"epochs": 1, "batch_size": 20},
        "output": {"dir": ")" + (dir.path() / "out").string() +
                                                R"("}})");
    REQUIRE(run(kBin + " train --config " + config).status == 0);
    const std::string model = (dir.path() / "out/model.bin").string();
    const std::string base = kBin + " sample --model " + model + " --config " + config;
    check_one_line(run(base + " --prompt abc"), "gossamer sample needs a language model");
    check_one_line(run(base + " --prompt abc --temperature -0.5"), "--temperature");
    check_one_line(run(base + " --prompt abc --chars -1"), "--chars");
    check_one_line(run(base + " --prompt abc --chars 1000001"), "--chars");
    check_one_line(run(base), "--prompt is required");
    check_one_line(
        run(kBin + " sample --model " + model + ".missing --config " + config + " --prompt a"),
        ".missing");
}
