// gossamer sim with the delayed rules, the outbox and chunked sends, as a user runs it: they run,
// and bad values are one line naming the option, exit 2, before anything is written.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "support/run.hpp"
#include "support/temp_dir.hpp"

using gossamer::test::run;
using gossamer::test::TempDir;

namespace {

const std::string kBin = GOSSAMER_BINARY;
const std::string kSrc = GOSSAMER_SOURCE_DIR;

std::string config(TempDir& dir, const std::string& algorithms) {
    return dir.write("train.json", R"({"seed": 3,
        "data": {"name": "logreg_synthetic", "samples": 800, "test_samples": 200, "features": 10, "seed": 5},
        "model": {"name": "softmax"}, "optimizer": {"name": "sgd", "lr": 0.2},
        "training": {"epochs": 2, "batch_size": 20}, "algorithms": )" +
                                       algorithms + "}");
}

gossamer::test::RunResult sim(TempDir& dir, const std::string& cfg, const std::string& algos) {
    const auto topology =
        dir.write("exp4.json", R"({"peers": {"count": 4}, "graph": {"family": "exponential"}})");
    return run(kBin + " sim --topology " + topology + " --cluster " + kSrc +
               "/examples/clusters/small4.json --config " + cfg + " --algorithms " + algos +
               " --out " + (dir.path() / "o").string());
}

}  // namespace

TEST_CASE("sim runs delayed dpsgd and choco and push-sum with outboxes") {
    TempDir dir;
    const auto cfg = config(dir, R"({"dpsgd": {"delay": 1}, "choco": {"delay": 1},
        "sgp": {"outbox": true}, "async": {"outbox": true}})");
    const auto r = sim(dir, cfg, "dpsgd,choco,sgp,async");
    CAPTURE(r.err);
    CHECK(r.status == 0);
    for (const char* a : {"dpsgd", "choco", "sgp", "async"}) {
        CAPTURE(a);
        CHECK(std::filesystem::exists(dir.path() / "o" / a / "seed0" / "metrics.jsonl"));
        CHECK(r.out.find(a) != std::string::npos);  // a row of the table
    }
}

TEST_CASE("sim runs every gossip algorithm with chunked sends, fixed and \"auto\"") {
    TempDir dir;
    const auto cfg =
        config(dir, R"({"dpsgd": {"chunk_bytes": "auto", "delay": 1, "partition_ready": true},
        "choco": {"chunk_bytes": 16}, "sgp": {"chunk_bytes": 32, "outbox": true},
        "async": {"chunk_bytes": "auto"}})");
    const auto r = sim(dir, cfg, "dpsgd,choco,sgp,async");
    CAPTURE(r.err);
    CHECK(r.status == 0);
    for (const char* a : {"dpsgd", "choco", "sgp", "async"}) {
        CAPTURE(a);
        CHECK(std::filesystem::exists(dir.path() / "o" / a / "seed0" / "metrics.jsonl"));
    }
}

TEST_CASE("sim: partition_ready with multirate partitions is one line naming it, exit 2") {
    TempDir dir;
    const auto cfg = dir.write("mr.json", R"({"seed": 3,
        "data": {"name": "logreg_synthetic", "samples": 800, "test_samples": 200, "features": 10, "seed": 5},
        "model": {"name": "mlp", "hidden": [8]}, "optimizer": {"name": "sgd", "lr": 0.2},
        "partitions": {"fast": ["fc2"], "slow": ["*"]},
        "multirate": {"partitions": {"slow": {"period": 2, "gossip_period": 2}}},
        "training": {"epochs": 1, "batch_size": 20},
        "algorithms": {"dpsgd": {"delay": 1, "partition_ready": true}}})");
    const auto r = sim(dir, cfg, "dpsgd");
    CAPTURE(r.err);
    CHECK(r.status == 2);
    CHECK(r.err.find("algorithms.dpsgd.partition_ready") != std::string::npos);
    CHECK(r.err.find("mr.json") != std::string::npos);
    CHECK(r.err.find('\n') == r.err.size() - 1);  // one line
    CHECK_FALSE(std::filesystem::exists(dir.path() / "o"));
}

TEST_CASE("sim: a bad delay or outbox is one line naming the option, exit 2, nothing written") {
    const std::pair<const char*, const char*> cases[] = {
        {R"({"dpsgd": {"delay": 2}})", "algorithms.dpsgd.delay"},
        {R"({"dpsgd": {"mode": "cta", "delay": 1}})", "algorithms.dpsgd.delay"},
        {R"({"choco": {"delay": "yes"}})", "algorithms.choco.delay"},
        {R"({"sgp": {"outbox": 1}})", "algorithms.sgp.outbox"},
        {R"({"async": {"outbox": "on"}})", "algorithms.async.outbox"},
        {R"({"dpsgd": {"chunk_bytes": 0}})", "algorithms.dpsgd.chunk_bytes"},
        {R"({"dpsgd": {"chunk_bytes": 3}})", "algorithms.dpsgd.chunk_bytes"},
        {R"({"dpsgd": {"chunk_bytes": "1MiB"}})", "algorithms.dpsgd.chunk_bytes"},
        {R"({"choco": {"chunk_bytes": -4}})", "algorithms.choco.chunk_bytes"},
        {R"({"sgp": {"chunk_bytes": "big"}})", "algorithms.sgp.chunk_bytes"},
        {R"({"sgp": {"chunk_bytes": true}})", "algorithms.sgp.chunk_bytes"},
        {R"({"async": {"chunk_bytes": 2}})", "algorithms.async.chunk_bytes"},
        {R"({"async": {"chunk_bytes": 1.5}})", "algorithms.async.chunk_bytes"},
        {R"({"choco": {"chunk_bytes": "AUTO"}})", "algorithms.choco.chunk_bytes"},
        {R"({"dpsgd": {"partition_ready": true, "reweight": {}}})",
         "algorithms.dpsgd.partition_ready"},
        {R"({"dpsgd": {"delay": 1, "partition_ready": "yes"}})",
         "algorithms.dpsgd.partition_ready"},
    };
    for (const auto& [algorithms, path] : cases) {
        CAPTURE(algorithms);
        TempDir dir;
        const auto cfg = config(dir, algorithms);
        const auto r = sim(dir, cfg, "dpsgd,choco,sgp,async");
        CAPTURE(r.err);
        CHECK(r.status == 2);
        CHECK(r.err.find(path) != std::string::npos);
        CHECK(r.err.find('\n') == r.err.size() - 1);  // one line
        CHECK_FALSE(std::filesystem::exists(dir.path() / "o"));
    }
}
