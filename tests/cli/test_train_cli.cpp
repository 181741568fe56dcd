// gossamer train as a user runs it: the example config end to end, determinism, every bad
// input of the issue (one line, exit 2, nothing written) and a diverging run (exit 3).
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "gossamer/core/metrics.hpp"
#include "gossamer/core/model_file.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

using gossamer::test::run;
using gossamer::test::RunResult;
using gossamer::test::TempDir;
using Json = nlohmann::json;

namespace {

const std::string kBin = GOSSAMER_BINARY;
const std::string kExamples = std::string(GOSSAMER_SOURCE_DIR) + "/examples/train/";

RunResult train(const std::string& args) {
    return run(kBin + " train " + args);
}

Json example(const std::string& name) {
    std::ifstream in(kExamples + name);
    return Json::parse(in);
}

// A small, fast config on the synthetic logistic set.
Json small_logreg() {
    Json j = example("logreg_synthetic.json");
    j["data"]["samples"] = 600;
    j["data"]["test_samples"] = 200;
    j["training"]["epochs"] = 3;
    return j;
}

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// Writes `config` with output into dir/out, runs it, and checks the one-line error.
void check_bad(const Json& config, const std::string& text) {
    TempDir dir;
    Json c = config;
    c["output"] = {{"dir", (dir.path() / "out").string()}};
    auto path = dir.write("c.json", c.dump());
    auto r = train("--config " + path);
    CAPTURE(r.err);
    CHECK(r.status == 2);
    CHECK(r.err.find(text) != std::string::npos);
    CHECK(r.err.rfind("error: " + path + ": ", 0) == 0);
    CHECK(r.err.find('\n') == r.err.size() - 1);
    CHECK_FALSE(std::filesystem::exists(dir.path() / "out"));  // nothing half-started
}

}  // namespace

TEST_CASE("the synthetic logistic example reaches its known optimum within 1e-3") {
    TempDir dir;
    auto r = train("--config " + kExamples + "logreg_synthetic.json --json --out " +
                   dir.path().string());
    REQUIRE(r.status == 0);
    auto s = Json::parse(r.out);
    CHECK(std::abs(s["optimum_loss"]["gap"].get<double>()) < 1e-3);
    auto lines = gossamer::read_json_lines((dir.path() / "metrics.jsonl").string());
    REQUIRE(lines.size() == 40);  // one evaluation per epoch
    for (const char* key : {"step", "time", "train_loss", "test_loss", "test_accuracy"})
        CHECK_MESSAGE(lines.back().contains(key), key);
    auto model = gossamer::load_model_file((dir.path() / "model.bin").string());
    CHECK(model.step == 1600);
    CHECK(model.params.size() == 42);
    CHECK(model.model.rfind("softmax", 0) == 0);
}

TEST_CASE("the same seed trains bit-identical models, another seed does not") {
    TempDir dir;
    Json c = small_logreg();
    auto run_with = [&](const std::string& name, int seed) {
        c["seed"] = seed;
        c["output"] = {{"dir", (dir.path() / name).string()}};
        REQUIRE(train("--config " + dir.write(name + ".json", c.dump())).status == 0);
        return slurp((dir.path() / name / "model.bin").string());
    };
    const std::string a = run_with("a", 1), b = run_with("b", 1), other = run_with("c", 2);
    CHECK(a == b);
    CHECK(a != other);
    CHECK(slurp((dir.path() / "a/metrics.jsonl").string()).size() > 0);
}

TEST_CASE("bad input: unknown model or optimizer") {
    Json c = small_logreg();
    c["model"] = {{"name", "mlpp"}};
    check_bad(c, "model.name: unknown");
    c = small_logreg();
    c["optimizer"]["name"] = "adagrad";
    check_bad(c, "optimizer.name: unknown value \"adagrad\"");
}

TEST_CASE("bad input: non-positive layer sizes") {
    Json c = small_logreg();
    c["model"] = {{"name", "mlp"}, {"hidden", {64, 0}}};
    check_bad(c, "model.hidden[1]");
}

TEST_CASE("bad input: an input size that does not match the data") {
    Json c = small_logreg();
    c["model"] = {{"name", "softmax"}, {"input", 784}};
    check_bad(c, "model.input");
}

TEST_CASE("bad input: a batch larger than the training set") {
    Json c = small_logreg();
    c["training"]["batch_size"] = 601;
    check_bad(c,
              "training.batch_size: batch size 601 is larger than the training set of 600 samples");
}

TEST_CASE("bad input: non-positive or non-finite learning rates") {
    Json c = small_logreg();
    c["optimizer"]["lr"] = 0;
    check_bad(c, "optimizer.lr");
    c["optimizer"]["lr"] = -0.1;
    check_bad(c, "optimizer.lr");
    TempDir dir;
    auto path = dir.write("inf.json",
                          R"({"data": {"name": "logreg_synthetic", "samples": 100, "features": 2},
        "model": {"name": "softmax"}, "optimizer": {"name": "sgd", "lr": 1e999}})");
    auto r = train("--config " + path);
    CHECK(r.status == 2);
    CHECK(r.err.find("invalid JSON: number overflow") != std::string::npos);
}

TEST_CASE("bad input: partitions that overlap or leave a gap") {
    Json c = small_logreg();  // softmax 20 -> 2: 42 parameters
    c["partitions"] = {{"a", {{"offset", 0}, {"size", 30}}}, {"b", {{"offset", 20}, {"size", 22}}}};
    check_bad(c, "overlap");
    c["partitions"] = {{"a", {{"offset", 0}, {"size", 20}}}, {"b", {{"offset", 30}, {"size", 12}}}};
    check_bad(c, "parameters [20, 30) belong to no partition");
}

TEST_CASE("bad input: missing or corrupt IDX files, unknown keys") {
    TempDir data;
    Json c = small_logreg();
    c["data"] = {{"name", "fashion-mnist"}, {"dir", data.path().string()}};
    c["model"] = {{"name", "mlp"}, {"hidden", {16}}};
    {
        TempDir dir;
        auto path = dir.write("c.json", c.dump());
        auto r = train("--config " + path);
        CHECK(r.status == 2);
        CHECK(r.err.find("train-images-idx3-ubyte.gz") != std::string::npos);
        CHECK(r.err.find("apt-get install dataset-fashion-mnist") != std::string::npos);
    }
    data.write("train-images-idx3-ubyte.gz", "this is not gzip and not IDX");
    data.write("train-labels-idx1-ubyte.gz", "nor this");
    TempDir dir;
    auto r = train("--config " + dir.write("c.json", c.dump()));
    CHECK(r.status == 2);
    CHECK(r.err.find("magic") != std::string::npos);
    Json typo = small_logreg();
    typo["trainng"] = Json::object();
    check_bad(typo, "unknown key \"trainng\"; did you mean \"training\"?");
}

TEST_CASE(
    "a loss that becomes infinite stops with the step and rate, keeping the last good model") {
    TempDir dir;
    // Least squares with SGD far above the stable rate: the error grows about 4x per step.
    Json c = {{"seed", 1},
              {"data",
               {{"name", "least_squares_synthetic"},
                {"samples", 200},
                {"test_samples", 50},
                {"features", 5}}},
              {"model", {{"name", "linear"}}},
              {"optimizer", {{"name", "sgd"}, {"lr", 2.5}}},
              {"training", {{"epochs", 100}, {"batch_size", 200}, {"eval_every", 1}}},
              {"output", {{"dir", (dir.path() / "out").string()}}}};
    auto r = train("--config " + dir.write("c.json", c.dump()));
    CAPTURE(r.err);
    CHECK(r.status == 3);
    CHECK(r.err.find("the training loss became") != std::string::npos);
    CHECK(r.err.find("with learning rate 2.5") != std::string::npos);
    CHECK(r.err.find("The last good model is") != std::string::npos);
    auto model = gossamer::load_model_file((dir.path() / "out/model.bin").string());
    CHECK(model.step > 0);
    for (float v : model.params.span()) CHECK(std::isfinite(v));
    auto lines = gossamer::read_json_lines((dir.path() / "out/metrics.jsonl").string());
    CHECK(lines.back()["event"] == "diverged");
}

TEST_CASE("bad input: multirate partitions, periods and compressors") {
    Json c = small_logreg();  // softmax 20 -> 2: 42 parameters
    c["partitions"] = {{"a", {{"offset", 0}, {"size", 20}}}, {"b", {{"offset", 20}, {"size", 22}}}};
    c["multirate"] = {{"partitions", {{"c", {{"period", 4}}}}}};
    check_bad(c, "multirate.partitions.c: unknown partition \"c\"; the layout has a, b");
    c["multirate"] = {{"partitions", {{"a", {{"period", 0}}}}}};
    check_bad(c, "multirate.partitions.a.period: period 0 must be an integer >= 1");
    c["multirate"] = {{"partitions", {{"a", {{"period", 2}, {"gossip_period", 0}}}}}};
    check_bad(c, "multirate.partitions.a.gossip_period: gossip_period 0 must be");
    c["multirate"] = {{"partitions", {{"a", {{"compressor", {{"name", "int2"}}}}}}}};
    check_bad(c, "multirate.partitions.a.compressor.name: unknown value \"int2\"");
    c["multirate"] = {
        {"partitions", {{"a", {{"compressor", {{"name", "int4"}, {"block", 196}}}}}}}};
    check_bad(c, "multirate.partitions.a.compressor.block: int4 block 196 is above 195");
    c["multirate"] = {{"partitions", {{"a", {{"period", 2}}}, {"b", {{"period", 2}}}}}};
    check_bad(c, "every partition has a period above 1");
}

TEST_CASE("multirate: the summary reports each partition's updates and backward work") {
    TempDir dir;
    Json c = small_logreg();  // 600 samples, batch 100, 3 epochs: 18 steps
    c["model"] = {{"name", "mlp"}, {"hidden", {8}}};
    c["optimizer"] = {{"name", "sgd"}, {"lr", 0.1}};
    c["partitions"] = {{"fast", {"fc2"}}, {"slow", {"*"}}};
    c["multirate"] = {{"partitions", {{"slow", {{"period", 3}}}}}};
    c["output"] = {{"dir", (dir.path() / "out").string()}};
    auto r = train("--json --config " + dir.write("c.json", c.dump()));
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    const auto parts = Json::parse(r.out)["partitions"];
    REQUIRE(parts.size() == 2);
    CHECK(parts[0]["name"] == "slow");
    CHECK(parts[0]["updates"] == 6);
    CHECK(parts[1]["name"] == "fast");
    CHECK(parts[1]["updates"] == 18);
    CHECK(parts[0]["backward_macs"].get<std::uint64_t>() > 0);
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;  // ASan reserves terabytes of address space: no ulimit -v
#else
constexpr bool kSanitized = false;
#endif

TEST_CASE("bad input: an output folder that cannot be created is one line, exit 2, no training") {
    TempDir dir;
    const auto file = dir.write("a_file", "mine");
    for (const std::string& out : {file, file + "/sub", std::string("/proc/gossamer-test/out")}) {
        CAPTURE(out);
        Json c = small_logreg();
        c["output"] = {{"dir", out}};
        const auto path = dir.write("c.json", c.dump());
        auto r = train("--config " + path);
        CAPTURE(r.err);
        CHECK(r.status == 2);
        CHECK(r.err.rfind("error: " + path + ": output.dir: ", 0) == 0);
        CHECK(r.err.find(out) != std::string::npos);
        CHECK(r.err.find('\n') == r.err.size() - 1);
        CHECK(r.err.find("epoch") == std::string::npos);  // refused before training
        auto flag = train("--config " + path + " --out " + out);
        CHECK(flag.status == 2);
        CHECK(flag.err.rfind("error: --out: ", 0) == 0);
        CHECK(flag.err.find('\n') == flag.err.size() - 1);
    }
    CHECK(slurp(file) == "mine");
}

TEST_CASE("bad input: a model too large for this machine names the size and the limit") {
    Json c = small_logreg();
    c["model"] = {{"name", "mlp"}, {"hidden", {1000000, 1000000}}};
    check_bad(c,
              "model: training mlp 20-1000000-1000000-2 (1000024000002 parameters) with sgd "
              "(parameters, gradient, optimizer state) needs about 18.19 TiB of memory, more than");
}

TEST_CASE("bad input: a model above the address-space limit (ulimit -v) is refused naming it" *
          doctest::skip(kSanitized)) {
    TempDir dir;
    Json c = small_logreg();
    c["model"] = {{"name", "mlp"}, {"hidden", {100000, 1000}}};  // 102 M parameters: 2 GB
    c["output"] = {{"dir", (dir.path() / "out").string()}};
    auto r = run("ulimit -v 1200000 && timeout -s KILL 60 " + kBin + " train --config " +
                 dir.write("c.json", c.dump()));
    CAPTURE(r.err);
    CHECK(r.status == 2);
    CHECK(r.err.find("needs about 1.90 GiB of memory, more than") != std::string::npos);
    CHECK((r.err.find("RLIMIT_AS (ulimit -v 1200000)") != std::string::npos ||
           r.err.find("MemAvailable") != std::string::npos));
    CHECK(r.err.find('\n') == r.err.size() - 1);
    CHECK_FALSE(std::filesystem::exists(dir.path() / "out"));
}

TEST_CASE("output folders: a folder the user wrote is refused, an earlier run's is replaced") {
    TempDir dir;
    Json c = small_logreg();
    c["output"] = {{"dir", (dir.path() / "out").string()}, {"checkpoint_every", 6}};
    const auto path = dir.write("c.json", c.dump());
    // A folder with a user's file and no marker: refused, the file untouched.
    std::filesystem::create_directories(dir.path() / "mine");
    dir.write("mine/notes.txt", "keep me");
    auto mine = train("--config " + path + " --out " + (dir.path() / "mine").string());
    CAPTURE(mine.err);
    CHECK(mine.status == 2);
    CHECK(mine.err.find("is not empty and holds no .gossamer-output marker") != std::string::npos);
    CHECK(mine.err.find("pick another --out, or empty the folder") != std::string::npos);
    CHECK(mine.err.find('\n') == mine.err.size() - 1);
    CHECK(slurp((dir.path() / "mine/notes.txt").string()) == "keep me");
    CHECK_FALSE(std::filesystem::exists(dir.path() / "mine/metrics.jsonl"));
    // An empty folder is used and marked.
    std::filesystem::create_directories(dir.path() / "empty");
    REQUIRE(train("--config " + path + " --out " + (dir.path() / "empty").string()).status == 0);
    CHECK(std::filesystem::exists(dir.path() / "empty/.gossamer-output"));
    // A marked folder is replaced with one line saying so: the earlier checkpoints are gone.
    REQUIRE(train("--config " + path).status == 0);
    const auto marker = Json::parse(slurp((dir.path() / "out/.gossamer-output").string()));
    CHECK(marker["command"] == "gossamer train");
    CHECK(std::filesystem::exists(dir.path() / "out/checkpoint-6.bin"));
    c["output"]["checkpoint_every"] = 0;
    auto again = train("--config " + dir.write("c.json", c.dump()));
    CAPTURE(again.err);
    REQUIRE(again.status == 0);
    CHECK(again.err.find("note: replacing the earlier Gossamer output in " +
                         (dir.path() / "out").string() + " (written by gossamer train at ") !=
          std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dir.path() / "out/checkpoint-6.bin"));
    CHECK(std::filesystem::exists(dir.path() / "out/model.bin"));
}

TEST_CASE("a learning rate near DBL_MAX with a cosine schedule or a warm-up diverges, exit 3") {
    // (base - min_lr) x 2 overflowed to inf: "error: internal: sgd optimizer: learning rate inf".
    for (const Json& schedule : {Json{{"schedule", "cosine"}}, Json{{"warmup_steps", 10}}}) {
        CAPTURE(schedule.dump());
        TempDir dir;
        Json c = small_logreg();
        c["optimizer"]["lr"] = 1e308;
        c["schedule"] = schedule;
        c["output"] = {{"dir", (dir.path() / "out").string()}};
        auto r = train("--config " + dir.write("c.json", c.dump()));
        CAPTURE(r.err);
        CHECK(r.status == 3);
        CHECK(r.err.find("internal") == std::string::npos);
        CHECK(r.err.find("the training loss became") != std::string::npos);
    }
}

TEST_CASE("bad input: a cosine warm-up longer than the run names warmup_steps") {
    Json c = small_logreg();
    c["schedule"] = {{"schedule", "cosine"}, {"warmup_steps", 1000000000000000}};
    check_bad(c, "schedule.warmup_steps: warmup_steps 1000000000000000 is longer than any run");
    c["schedule"]["warmup_steps"] = 1000;  // 3 epochs of 600 samples are fewer steps
    check_bad(c, "schedule.warmup_steps: warmup_steps 1000 is not below the run's ");
}
