#pragma once
// A job of 4 `gossamer peer` processes on 127.0.0.1 (free ports, a ring, synthetic logistic
// regression): what test_peer_cli.cpp and test_elastic_cli.cpp start.
#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cluster.hpp"
#include "processes.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

namespace gossamer::test {

using Json = nlohmann::json;
using namespace std::chrono_literals;

inline const std::string kBin = GOSSAMER_BINARY;
// Job tokens no other text of a log or an output contains by chance.
inline const std::string kToken = "tok-right-7f3a9c";
inline const std::string kWrongToken = "tok-wrong-91c2e4";

// 4 peers on a ring with free ports, synthetic logistic regression (10 steps per epoch and
// peer), steps padded to `base_time` by the cluster file.
struct Job {
    TempDir dir;
    std::string topology, config, cluster, out;
    explicit Job(int epochs = 3, double base_time = 0.005, const std::string& cluster_peers = "") {
        std::string peers;
        for (const auto& e : free_endpoints(4))
            peers += (peers.empty() ? "" : ", ") +
                     fmt::format(R"({{"host": "{}", "port": {}}})", e.host, e.port);
        topology = dir.write("ring4.json",
                             R"({"peers": [)" + peers + R"(], "graph": {"family": "ring"}})");
        config = dir.write("train.json", fmt::format(R"({{"seed": 3,
            "data": {{"name": "logreg_synthetic", "samples": 800, "test_samples": 200, "features": 10, "seed": 5}},
            "model": {{"name": "softmax"}}, "optimizer": {{"name": "sgd", "lr": 0.2}},
            "training": {{"epochs": {}, "batch_size": 20}}}})",
                                                     epochs));
        cluster = dir.write("cluster.json", fmt::format(R"({{"defaults": {{"base_time": {}}},
            {} "network": {{"latency": 1e-5, "bandwidth": 1e9}}}})",
                                                        base_time, cluster_peers));
        out = (dir.path() / "out").string();
    }
    // The job token goes through the environment (GOSSAMER_JOB_TOKEN), never argv.
    std::unique_ptr<Process> start(int rank, const std::string& algo,
                                   const std::string& token = kToken,
                                   const std::vector<std::string>& extra = {}) const {
        std::vector<std::string> args = {kBin,          "peer",
                                         "--topology",  topology,
                                         "--config",    config,
                                         "--cluster",   cluster,
                                         "--rank",      std::to_string(rank),
                                         "--algorithm", algo,
                                         "--out",       out,
                                         "--job-id",    "9"};
        args.insert(args.end(), extra.begin(), extra.end());
        return std::make_unique<Process>(
            args, (dir.path() / fmt::format("log-{}-{}.txt", rank, token)).string(),
            std::vector<std::pair<std::string, std::string>>{{"GOSSAMER_JOB_TOKEN", token}});
    }
    std::string metrics(int rank) const { return out + fmt::format("/peer{}.jsonl", rank); }
    // The summary line of a peer's metrics.
    Json summary(int rank) const {
        std::ifstream in(metrics(rank));
        Json last;
        for (std::string line; std::getline(in, line);)
            if (!line.empty()) last = Json::parse(line);
        return last;
    }
    Json average() const {
        std::ifstream in(out + "/average.json");
        return Json::parse(in);
    }
};

// The job's 4 peers under `algo`, returned once rank `watched` has written 40 metric lines
// (flushed per step: it is training), at most 30 s after the start.
inline std::vector<std::unique_ptr<Process>> start_training(const Job& job, const std::string& algo,
                                                            int watched) {
    std::vector<std::unique_ptr<Process>> peers;
    for (int r = 0; r < 4; ++r) peers.push_back(job.start(r, algo));
    const auto until = std::chrono::steady_clock::now() + 30s;
    while (count_lines(job.metrics(watched)) < 40 && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(10ms);
    REQUIRE_MESSAGE(count_lines(job.metrics(watched)) >= 40,
                    "rank " << watched << "'s log:\n"
                            << peers[static_cast<std::size_t>(watched)]->log()
                            << "\nrank 0's log:\n"
                            << peers[0]->log());
    return peers;
}

// Waits (at most 10 s) until rank 0 installed view 1 without rank 2: the others declared the
// killed rank 2 lost and its rank can be joined again.
inline void wait_rank_2_removed(const Process& rank0) {
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (rank0.log().find("view 1 installed: ranks 0, 1, 3") == std::string::npos &&
           std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(10ms);
    REQUIRE_MESSAGE(rank0.log().find("view 1 installed: ranks 0, 1, 3") != std::string::npos,
                    rank0.log());
}

}  // namespace gossamer::test
