// The outer layer at the command line: bad "outer" values and algorithms that refuse it are
// one line and exit status 2 with nothing started or written; a good section runs under sim
// (math and cost), launch --inproc and peers padded to the cluster file's step time.
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gossamer/core/json.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using gossamer::test::run;

namespace {

const std::string kBin = GOSSAMER_BINARY;

struct Job {
    gossamer::test::TempDir dir;
    std::string topology, cluster;
    Job() {
        topology =
            dir.write("ring4.json", R"({"peers": {"count": 4}, "graph": {"family": "ring"}})");
        cluster = dir.write("c4.json", R"({"version": 1, "n": 4, "defaults": {"base_time": 0.02},
            "network": {"latency": 1e-4, "bandwidth": 1.25e8}})");
    }
    std::string config(const std::string& outer) {
        return dir.write("train.json", R"({"seed": 2,
            "data": {"name": "logreg_synthetic", "samples": 1600, "test_samples": 400,
                     "features": 10, "seed": 4},
            "model": {"name": "mlp", "hidden": [16]}, "optimizer": {"name": "sgd", "lr": 0.1},
            "training": {"epochs": 2, "batch_size": 20}, "outer": )" +
                                           outer + "}");
    }
    std::string out() const { return (dir.path() / "out").string(); }
};

std::string first_line(const std::string& s) {
    return s.substr(0, s.find('\n'));
}

}  // namespace

TEST_CASE("outer at the command line: bad values and refusals are one line, exit 2, no output") {
    struct Case {
        const char* outer;
        const char* command;  // sim | launch | train
        const char* algorithms;
        const char* says;
    };
    const Case cases[] = {
        {R"({"steps": 0})", "sim", "allreduce", "train.json: outer.steps: 0 inner steps"},
        {R"({"steps": 4, "lr": -1})", "launch", "dpsgd", "train.json: outer.lr: outer learning"},
        {R"({"steps": 4, "momentum": 1.5})", "sim", "sgp", "train.json: outer.momentum:"},
        {R"({"steps": 4, "optimizer": "lamb"})", "launch", "async", "train.json: outer.optimizer:"},
        {R"({"steps": 4, "partitions": ["fc7"]})", "sim", "dpsgd",
         "train.json: outer.partitions: no partition \"fc7\""},
        {R"({"steps": 4})", "sim", "allreduce,gadmm", "train.json: outer: gadmm takes local"},
        {R"({"steps": 4})", "launch", "gadmm", "train.json: outer: gadmm takes local"},
        {R"({"steps": 4})", "train", "", "train.json: outer: gossamer train runs one process"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.outer);
        CAPTURE(c.command);
        Job job;
        const std::string config = job.config(c.outer);
        std::string cmd = kBin + " " + c.command + " --config '" + config + "'";
        if (std::string(c.command) != "train")
            cmd += " --topology '" + job.topology + "' --algorithms " + c.algorithms + " --out '" +
                   job.out() + "'";
        if (std::string(c.command) == "sim") cmd += " --cluster '" + job.cluster + "'";
        if (std::string(c.command) == "launch") cmd += " --inproc";
        const auto r = run(cmd);
        CAPTURE(r.err);
        CHECK(r.status == 2);
        const std::string line = first_line(r.err.substr(r.err.find("error: ") == 0 ? 7 : 0));
        CHECK(line.find(c.says) != std::string::npos);
        CHECK_FALSE(fs::exists(job.out()));
    }
}

TEST_CASE("outer at the command line: sim (math and cost) and launch --inproc run it") {
    Job job;
    const std::string config =
        job.config(R"({"steps": 4, "optimizer": "nesterov", "lr": 0.7, "momentum": 0.9})");
    const auto sim =
        run(kBin + " sim --config '" + config + "' --topology '" + job.topology + "' --cluster '" +
            job.cluster + "' --algorithms allreduce,dpsgd --json --out '" + job.out() + "/sim'");
    REQUIRE(sim.status == 0);
    const auto sim_rows = gossamer::json::parse_text(sim.out, "sim");
    const auto launch =
        run(kBin + " launch --inproc --config '" + config + "' --topology '" + job.topology +
            "' --cluster '" + job.cluster + "' --algorithms allreduce,dpsgd --json --out '" +
            job.out() + "/launch'");
    REQUIRE(launch.status == 0);
    const auto launch_rows = gossamer::json::parse_text(launch.out, "launch");
    for (int k = 0; k < 2; ++k) {
        const auto& s = sim_rows.root->at("algorithms").at(k);
        const auto& l = launch_rows.root->at("algorithms").at(k);
        CAPTURE(s.dump());
        CAPTURE(l.dump());
        // Synchronous protocols: the same models in virtual and in real time.
        CHECK(s.at("final_accuracy").get<double>() == l.at("final_accuracy").get<double>());
        // 40 inner steps a peer, each padded to 0.02 s: 0.8 s of virtual and of real time.
        CHECK(s.at("end_time").get<double>() >= 0.8);
        CHECK(l.at("train_seconds").get<double>() >= 0.8);
    }
    // Cost mode: --steps counts inner steps; 100 of them take 100 padded steps.
    const auto cost = run(kBin + " sim --mode cost --steps 100 --model-size 1000 --config '" +
                          config + "' --topology '" + job.topology + "' --cluster '" + job.cluster +
                          "' --algorithms sgp --json --out '" + job.out() + "/cost'");
    REQUIRE(cost.status == 0);
    const auto c = gossamer::json::parse_text(cost.out, "cost");
    const auto& row = c.root->at("algorithms").at(0);
    CHECK(row.at("end_time").get<double>() >= 100 * 0.02);
    CHECK(row.at("end_time").get<double>() < 100 * 0.02 * 1.2);
}

TEST_CASE("outer at the command line: rounds by time, a 3x slow peer takes a third of the steps") {
    Job job;
    // Peer 0 computes 3x slower (0.06 s a step): one step fits a round of 0.08 s, the others
    // take four; 40 mean-shard steps at reference_steps 4 are 10 rounds.
    job.cluster = job.dir.write("slow.json", R"({"version": 1, "n": 4,
        "defaults": {"base_time": 0.02}, "peers": [{"rank": 0, "factor": 3}],
        "network": {"latency": 1e-4, "bandwidth": 1.25e8}})");
    const std::string config = job.config(R"({"seconds": 0.08, "reference_steps": 4})");
    const std::string common = " --config '" + config + "' --topology '" + job.topology +
                               "' --cluster '" + job.cluster + "' --algorithms allreduce,async";
    const auto sim = run(kBin + " sim" + common + " --json --out '" + job.out() + "/sim'");
    REQUIRE(sim.status == 0);
    const auto launch =
        run(kBin + " launch --inproc" + common + " --json --out '" + job.out() + "/launch'");
    REQUIRE(launch.status == 0);
    for (const std::string algorithm : {"allreduce", "async"}) {
        CAPTURE(algorithm);
        std::ifstream peers(job.out() + "/sim/" + algorithm + "/seed0/peers.jsonl");
        std::vector<std::int64_t> sim_inner, launch_inner;
        for (std::string line; std::getline(peers, line);) {
            const auto rec = gossamer::json::parse_text(line, "peers.jsonl");
            CHECK(rec.root->at("rounds").get<std::int64_t>() == 10);
            sim_inner.push_back(rec.root->at("inner_steps").get<std::int64_t>());
        }
        CHECK(sim_inner == std::vector<std::int64_t>{10, 40, 40, 40});
        // Real peers plan with the padded step time (or the measured one when longer: a loaded
        // machine may fit fewer steps, never more).
        for (int r = 0; r < 4; ++r) {
            std::ifstream in(job.out() + "/launch/" + algorithm + "/peer" + std::to_string(r) +
                             ".jsonl");
            std::int64_t last = -1;
            for (std::string line; std::getline(in, line);) {
                const auto rec = gossamer::json::parse_text(line, "peer.jsonl");
                if (rec.root->contains("inner_steps"))
                    last = rec.root->at("inner_steps").get<std::int64_t>();
            }
            launch_inner.push_back(last);
        }
        CHECK(launch_inner[0] == 10);
        for (int r = 1; r < 4; ++r) {
            CHECK(launch_inner[r] > 10);
            CHECK(launch_inner[r] <= 40);
        }
    }
}
