// Compressed pseudo-gradients under the outer layer (docs/algorithms/outer.md, "Compressed
// pseudo-gradients"): choco and qallreduce carry fp16, int8, int4 and top-k rounds in the
// simulator and over launch --inproc; int4's bytes against the fp32 rows are pinned (bytes are
// deterministic), its accuracy loosely checked on a tiny job; bad int4 options are one line,
// exit 2, with nothing started.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "gossamer/core/json.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using gossamer::test::run;

namespace {

const std::string kBin = GOSSAMER_BINARY;

// 4 peers on a ring, an MLP on synthetic data (418 parameters), 20 inner steps a peer and epoch.
struct Job {
    gossamer::test::TempDir dir;
    std::string topology, cluster;
    Job() {
        topology =
            dir.write("ring4.json", R"({"peers": {"count": 4}, "graph": {"family": "ring"}})");
        cluster = dir.write("c4.json", R"({"version": 1, "n": 4, "defaults": {"base_time": 0.002},
            "network": {"latency": 1e-4, "bandwidth": 1.25e8}})");
    }
    std::string config(const std::string& outer, const std::string& algorithms, int epochs = 2) {
        return dir.write("train.json", R"({"seed": 2,
            "data": {"name": "logreg_synthetic", "samples": 1600, "test_samples": 400,
                     "features": 10, "seed": 4},
            "model": {"name": "mlp", "hidden": [32]}, "optimizer": {"name": "sgd", "lr": 0.1},
            "training": {"epochs": )" + std::to_string(epochs) +
                                           R"(, "batch_size": 20}, "outer": )" + outer +
                                           R"(, "algorithms": )" + algorithms + "}");
    }
    std::string out() const { return (dir.path() / "out").string(); }
    // `gossamer sim` or `gossamer launch --inproc` of `algorithms`, its JSON summary's rows.
    gossamer::json::Document rows(const std::string& command, const std::string& config,
                                  const std::string& algorithms, const std::string& sub) {
        std::string cmd = kBin + " " + command + " --config '" + config + "' --topology '" +
                          topology + "' --cluster '" + cluster + "' --algorithms " + algorithms +
                          " --json --out '" + out() + "/" + sub + "'";
        if (command == "launch") cmd += " --inproc";
        const auto r = run(cmd);
        CAPTURE(r.err);
        REQUIRE(r.status == 0);
        return gossamer::json::parse_text(r.out, command);
    }
};

constexpr const char* kOuter = R"({"steps": 4, "optimizer": "nesterov", "lr": 0.7,
                                   "momentum": 0.9})";

const gossamer::json::Json& row(const gossamer::json::Document& d, int k) {
    return d.root->at("algorithms").at(k);
}
double bytes(const gossamer::json::Json& r) {
    return r.at("peer_quantiles").at("bytes_sent").at("p50").get<double>();
}
double mb_per_peer(const gossamer::json::Json& r) {
    return r.at("mb_sent_per_peer").get<double>();
}
double accuracy(const gossamer::json::Json& r) {
    return r.at("final_accuracy").get<double>();
}

}  // namespace

TEST_CASE("outer codecs: int4 rounds use 4x fewer bytes than fp32 rounds, accuracy close") {
    // 80 inner steps a peer in 40 rounds of 2. dpsgd sends 418 floats to each of its 2
    // neighbours a round. choco (a static graph: one shared replica) sends each neighbour one
    // full model first, then int4 deltas: 7 scales + 209 bytes of codes, 60 words. Each message
    // adds the 88-byte header. qallreduce cuts Delta into 4 segments of 104-105 values and
    // re-encodes them at every hop (int4: 2 scales + 53 bytes, 16 words); allreduce sends them
    // as floats: on so small a model the header caps its ratio.
    Job job;
    const std::string algos =
        R"({"dpsgd": {"mode": "atc"}, "choco": {"gamma": 0.5, "compressor": {"name": "int4"}},
            "allreduce": {}, "qallreduce": {"compressor": {"name": "int4"}}})";
    const auto config = job.config(
        R"({"steps": 2, "optimizer": "nesterov", "lr": 0.7, "momentum": 0.9})", algos, 4);
    const auto sim = job.rows("sim", config, "dpsgd,choco,allreduce,qallreduce", "sim");
    const double dpsgd = bytes(row(sim, 0)), choco = bytes(row(sim, 1));
    const double allreduce = bytes(row(sim, 2)), qallreduce = bytes(row(sim, 3));
    MESSAGE("bytes per peer: dpsgd " << dpsgd << ", choco int4 " << choco << " (" << dpsgd / choco
                                     << "x); allreduce " << allreduce << ", qallreduce int4 "
                                     << qallreduce << " (" << allreduce / qallreduce << "x)");
    const double header = 88, model = 4 * 418;
    CHECK(dpsgd == 40 * 2 * (header + model));
    CHECK(choco == 2 * (header + model) + 39 * 2 * (header + 4 * 60));
    CHECK(dpsgd / choco >= 4.0);  // 4.84: the full models first cost 1.2 rounds of int4 each
    // The peer at the median sends 40 rounds x 2 x 3 messages, two segments of 104 values and
    // one of 105 in the all-gather's forwarded bytes or its own.
    CHECK(allreduce / qallreduce > 3.3);
    CHECK(allreduce / qallreduce < 3.4);
    // Loose accuracy: compressed rounds within 2 points of their fp32 row on this tiny job.
    CHECK(accuracy(row(sim, 1)) > accuracy(row(sim, 0)) - 0.02);
    CHECK(accuracy(row(sim, 3)) > accuracy(row(sim, 2)) - 0.02);
    CHECK(accuracy(row(sim, 0)) > 0.7);
}

namespace {

// choco and qallreduce with `codec` under the outer layer, in sim and over launch --inproc.
void sim_and_launch(const char* codec) {
    {
        CAPTURE(std::string(codec));
        Job job;
        const std::string q = std::string(R"({"compressor": )") + codec + "}";
        const auto config =
            job.config(kOuter, R"({"choco": )" + q + R"(, "qallreduce": )" + q + "}");
        const auto sim = job.rows("sim", config, "choco,qallreduce", "sim");
        const auto launch = job.rows("launch", config, "choco,qallreduce", "launch");
        for (int k = 0; k < 2; ++k) {
            CAPTURE(row(sim, k).dump());
            CAPTURE(row(launch, k).dump());
            CHECK(accuracy(row(sim, k)) > 0.6);
            CHECK(accuracy(row(launch, k)) > 0.6);
            // The same bytes whether time is virtual or real.
            CHECK(mb_per_peer(row(sim, k)) == mb_per_peer(row(launch, k)));
        }
        // qallreduce is synchronous and its draws come from the message keys: the same model.
        CHECK(accuracy(row(sim, 1)) == accuracy(row(launch, 1)));
    }
}

}  // namespace

TEST_CASE("outer codecs: fp16 and int8 run under sim and launch --inproc") {
    sim_and_launch(R"({"name": "fp16"})");
    sim_and_launch(R"({"name": "int8", "block": 64})");
}

TEST_CASE("outer codecs: int4 and top-k run under sim and launch --inproc") {
    sim_and_launch(R"({"name": "int4", "block": 32})");
    sim_and_launch(R"({"name": "topk", "fraction": 0.2})");
}

TEST_CASE("outer codecs: bad int4 options are one line, exit 2, nothing written") {
    struct Case {
        const char* algorithms;
        const char* command;
        const char* says;
    };
    const Case cases[] = {
        {R"({"choco": {"compressor": {"name": "int4", "block": 0}}})", "sim",
         "train.json: algorithms.choco.compressor.block: 0 is out of range"},
        {R"({"qallreduce": {"compressor": {"name": "int4", "block": 196}}})", "launch",
         "train.json: algorithms.qallreduce.compressor.block: int4 block 196 is above 195"},
        {R"({"choco": {"compressor": {"name": "int4", "fraction": 0.1}}})", "sim",
         "train.json: algorithms.choco.compressor.fraction:"},
    };
    for (const auto& c : cases) {
        CAPTURE(std::string(c.algorithms));
        Job job;
        const auto config = job.config(kOuter, c.algorithms);
        const std::string algo =
            std::string(c.algorithms).find("choco") != std::string::npos ? "choco" : "qallreduce";
        std::string cmd = kBin + " " + c.command + " --config '" + config + "' --topology '" +
                          job.topology + "' --cluster '" + job.cluster + "' --algorithms " + algo +
                          " --out '" + job.out() + "'";
        if (std::string(c.command) == "launch") cmd += " --inproc";
        const auto r = run(cmd);
        CAPTURE(r.err);
        CHECK(r.status == 2);
        const std::string err = r.err.substr(r.err.find("error: ") == 0 ? 7 : 0);
        CHECK(err.substr(0, err.find('\n')).find(c.says) != std::string::npos);
        CHECK(std::count(r.err.begin(), r.err.end(), '\n') <= 1);
        CHECK_FALSE(fs::exists(job.out()));
    }
}
