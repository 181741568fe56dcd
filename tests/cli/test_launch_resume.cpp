// gossamer launch --resume OUT (docs/operations/checkpoint.md): a launch interrupted after its
// peers' checkpoints restarts every algorithm from the newest step all its peers hold and finishes;
// a folder it cannot resume is one line and exit 2.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "launch_job.hpp"

using gossamer::test::kBin;
using gossamer::test::LaunchJob;
using gossamer::test::run;
using Json = nlohmann::json;
namespace fs = std::filesystem;

TEST_SUITE("integration") {
    TEST_CASE("an interrupted launch resumes from its checkpoints and finishes") {
        LaunchJob job;
        // 100 steps of 20 ms per peer, a checkpoint every 10 (--checkpoint-every).
        job.config = job.dir.write("ckpt.json", R"({"seed": 3,
            "data": {"name": "logreg_synthetic", "samples": 800, "test_samples": 200, "features": 10, "seed": 5},
            "model": {"name": "softmax"}, "optimizer": {"name": "sgd", "lr": 0.2, "momentum": 0.9},
            "training": {"epochs": 10, "batch_size": 20}})");
        job.cluster = job.dir.write("slow.json", R"({"defaults": {"base_time": 0.02},
            "network": {"latency": 1e-5, "bandwidth": 1e9}})");
        const auto out = (job.dir.path() / "l").string();
        const std::string flags = " --no-plots --topology " + job.topology + " --config " +
                                  job.config + " --cluster " + job.cluster +
                                  " --algorithms dpsgd,async";
        // Interrupted (at most 10 s after the start) once every dpsgd peer holds step 20.
        const std::string held = out + "/dpsgd/checkpoint-{0,1,2,3}-20.state";
        auto r = run("bash -c '" + kBin + " launch" + flags + " --checkpoint-every 10 --out " +
                     out + " & p=$!; i=0; while ! ls " + held +
                     " >/dev/null 2>&1 && [ $i -lt 100 ]; "
                     "do sleep 0.1; i=$((i+1)); done; kill -INT $p; wait $p; echo rc=$?'");
        CAPTURE(r.err);
        REQUIRE(r.out == "rc=130\n");
        CHECK_FALSE(fs::exists(out + "/dpsgd/average.json"));
        // async never started: it has no folder, so the launch of both cannot resume (exit 2).
        auto refused = run(kBin + " launch" + flags + " --resume " + out);
        CAPTURE(refused.err);
        CHECK(refused.status == 2);
        CHECK(refused.err.find("/async is not a folder") != std::string::npos);

        auto resumed =
            run(kBin + " launch" + " --no-plots --topology " + job.topology + " --config " +
                job.config + " --cluster " + job.cluster + " --algorithms dpsgd --resume " + out);
        CAPTURE(resumed.err);
        REQUIRE(resumed.status == 0);
        CHECK(resumed.err.find("dpsgd: resuming at step ") != std::string::npos);
        std::ifstream in(out + "/dpsgd/average.json");
        const Json avg = Json::parse(in);
        CHECK(avg["steps"] == 100);
        CHECK(avg["survivors"] == Json::array({0, 1, 2, 3}));
        CHECK(avg["accuracy"].get<double>() > 0.6);
        // The stopped run's metrics are kept aside; the resumed peers' are new.
        CHECK(fs::exists(out + "/dpsgd/peer0.stopped.jsonl"));
        CHECK(fs::exists(out + "/dpsgd/peer0.jsonl"));
    }

    TEST_CASE("launch --resume refuses what it cannot resume with one line and exit 2") {
        LaunchJob job;
        const auto empty = job.dir.path() / "empty";
        fs::create_directories(empty / "dpsgd");
        struct Case {
            std::string flags, says;
        };
        for (const Case& c :
             {Case{"--resume " + empty.string(), "holds no checkpoint of rank 0"},
              Case{"--resume " + (job.dir.path() / "missing").string(), "is not a folder"},
              Case{"--inproc --resume " + empty.string(), "not --inproc threads"},
              Case{"--resume " + empty.string() + " --out " + (job.dir.path() / "x").string(),
                   "leave out --out or give the same folder"}}) {
            CAPTURE(c.flags);
            auto r = job.launch("--algorithms dpsgd " + c.flags);
            CAPTURE(r.err);
            CHECK(r.status == 2);
            CHECK(r.err.find(c.says) != std::string::npos);
            CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
        }
    }
}
