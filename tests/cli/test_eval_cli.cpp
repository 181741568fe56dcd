// gossamer eval as a user runs it: the model gossamer train wrote (and its checkpoints) gives
// back the test accuracy and loss train reported; every bad model file is one line, exit 2.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "gossamer/core/metrics.hpp"
#include "gossamer/core/model_file.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

using gossamer::test::read_file;
using gossamer::test::run;
using gossamer::test::RunResult;
using gossamer::test::TempDir;
using Json = nlohmann::json;

namespace {

const std::string kBin = GOSSAMER_BINARY;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;  // ASan reserves terabytes of address space: no ulimit -v
#else
constexpr bool kSanitized = false;
#endif

// A small mlp on the synthetic logistic set, with checkpoints every 30 steps.
Json small_config(const TempDir& dir, const std::string& hidden = "[8]") {
    return Json::parse(R"({"seed": 3,
        "data": {"name": "logreg_synthetic", "samples": 600, "test_samples": 200, "features": 10, "seed": 5},
        "model": {"name": "mlp", "hidden": )" +
                       hidden + R"(}, "optimizer": {"name": "sgd", "lr": 0.2},
        "training": {"epochs": 3, "batch_size": 20},
        "output": {"dir": ")" +
                       (dir.path() / "out").string() + R"(", "checkpoint_every": 30}})");
}

RunResult eval(const std::string& model, const std::string& config, const std::string& extra = "") {
    return run(kBin + " eval --model " + model + " --config " + config + " " + extra);
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

TEST_CASE("eval of train's model.bin gives the test accuracy and loss train reported") {
    TempDir dir;
    const auto config = dir.write("c.json", small_config(dir).dump());
    auto t = run(kBin + " train --json --config " + config);
    REQUIRE(t.status == 0);
    const auto trained = Json::parse(t.out);
    const auto model = (dir.path() / "out/model.bin").string();
    auto e = eval(model, config, "--json");
    CAPTURE(e.err);
    REQUIRE(e.status == 0);
    const auto j = Json::parse(e.out);
    CHECK(j["test_accuracy"].get<double>() == trained["test_accuracy"].get<double>());
    CHECK(j["test_loss"].get<double>() == trained["test_loss"].get<double>());
    CHECK(j["step"].get<int>() == 90);
    CHECK(j["parameters"].get<int>() == 10 * 8 + 8 + 8 * 2 + 2);
    CHECK(j["test_samples"].get<int>() == 200);
    // The table names the same numbers.
    auto table = eval(model, config);
    REQUIRE(table.status == 0);
    CHECK(table.out.find("test_accuracy") != std::string::npos);
    CHECK(table.out.find(fmt::format("{:.6f}", trained["test_loss"].get<double>())) !=
          std::string::npos);
    // A checkpoint: the metrics line of its step has its accuracy.
    auto c = eval((dir.path() / "out/checkpoint-60.bin").string(), config, "--json");
    REQUIRE(c.status == 0);
    CHECK(Json::parse(c.out)["step"].get<int>() == 60);
    for (const auto& line : gossamer::read_json_lines((dir.path() / "out/metrics.jsonl").string()))
        if (line["step"] == 60)
            CHECK(Json::parse(c.out)["test_accuracy"].get<double>() ==
                  line["test_accuracy"].get<double>());
}

TEST_CASE("eval: a missing, folder, truncated, corrupt or foreign file is one line, exit 2") {
    TempDir dir;
    const auto config = dir.write("c.json", small_config(dir).dump());
    REQUIRE(run(kBin + " train --config " + config).status == 0);
    const std::string good = read_file(dir.path() / "out/model.bin");
    std::string corrupt = good;
    corrupt[corrupt.size() / 2] = static_cast<char>(corrupt[corrupt.size() / 2] ^ 0x5a);
    check_one_line(eval((dir.path() / "nope.bin").string(), config), "cannot open model file");
    check_one_line(eval((dir.path() / "out").string(), config), "is a folder, not a model file");
    check_one_line(eval(dir.write("t.bin", good.substr(0, good.size() - 10)), config),
                   "truncated model file");
    check_one_line(eval(dir.write("h.bin", good.substr(0, 30)), config), "truncated model file");
    check_one_line(eval(dir.write("x.bin", corrupt), config), "checksum mismatch");
    check_one_line(eval(dir.write("j.bin", "{\"not\": \"a model\"}"), config), "bad magic number");
    check_one_line(eval(dir.write("e.bin", ""), config), "bad magic number");
    check_one_line(eval(dir.write("tr.bin", good + "x"), config), "trailing bytes");
}

TEST_CASE("eval: a model with a NaN or infinite parameter says so instead of an accuracy") {
    TempDir dir;
    const auto config = dir.write("c.json", small_config(dir).dump());
    REQUIRE(run(kBin + " train --config " + config).status == 0);
    auto file = gossamer::load_model_file((dir.path() / "out/model.bin").string());
    for (const float bad :
         {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
        auto params = file.params;
        params.span()[17] = bad;
        const auto path = (dir.path() / "nan.bin").string();
        gossamer::save_model_file(path, file.model, file.step, file.layout, params.span());
        check_one_line(eval(path, config),
                       fmt::format("nan.bin: parameters: parameter 17 of 106 is {}: the training "
                                   "that wrote this model diverged",
                                   std::isnan(bad) ? "NaN" : "-inf"));
    }
}

TEST_CASE("eval: a model file of another size names both sizes, exit 2") {
    TempDir dir;
    const auto config = dir.write("c.json", small_config(dir).dump());
    REQUIRE(run(kBin + " train --config " + config).status == 0);
    const auto model = (dir.path() / "out/model.bin").string();
    const auto wider = dir.write("w.json", small_config(dir, "[9]").dump());
    check_one_line(eval(model, wider), "the model file holds 106 parameters, but the model of " +
                                           wider + " (mlp 10-9-2 (119 parameters)) has 119");
    // The same parameters in one partition instead of one per layer: the layouts differ.
    auto other = small_config(dir);
    other["partitions"] = {{"all", {"*"}}};
    check_one_line(eval(model, dir.write("p.json", other.dump())),
                   "the model file's partitions (fc1 [0, 88), fc2 [88, 106)) differ");
}

TEST_CASE("eval: missing flags and a bad config are one line, exit 2") {
    TempDir dir;
    check_one_line(run(kBin + " eval --config x.json"), "--model FILE is required");
    check_one_line(run(kBin + " eval --model m.bin"), "--config TRAIN is required");
    check_one_line(eval("m.bin", (dir.path() / "none.json").string()), "none.json");
    CHECK(run(kBin + " --help").out.find("eval ") != std::string::npos);
    CHECK(run(kBin + " eval --help").status == 0);
}

TEST_CASE("out of memory while reading a model file is one line naming the file, exit 2" *
          doctest::skip(kSanitized)) {
    TempDir dir;
    const auto config = dir.write("c.json", small_config(dir).dump());
    // A sparse 4 GiB file that starts like a model file: reading it needs more than 1.5 GB.
    const auto big = (dir.path() / "big.bin").string();
    {
        const int fd = ::open(big.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        REQUIRE(fd >= 0);
        REQUIRE(::write(fd, "GSMRMODL", 8) == 8);
        REQUIRE(::ftruncate(fd, 4LL << 30) == 0);
        ::close(fd);
    }
    auto r = run("ulimit -v 1500000 && timeout -s KILL 60 " + kBin + " eval --model " + big +
                 " --config " + config);
    check_one_line(r, "out of memory while allocating the contents of model file " + big);
}
