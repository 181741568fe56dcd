#pragma once
// The job the gossamer launch tests run: the synthetic job of test_sim_cli.cpp, 4 peers on a
// ring, logistic regression, 3 epochs, on a fast homogeneous cluster (30 steps of 5 ms per peer).

#include <string>
#include <utility>
#include <vector>

#include "support/ports.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

namespace gossamer::test {

inline const std::string kBin = GOSSAMER_BINARY;

/// A topology file's text, `{"peers": [...], REST}`: n peers on 127.0.0.1 on ports the kernel
/// handed out as free a moment ago: ctest runs launch tests side by side, and a fixed base port
/// would put two jobs on one port (the second job's peers then reach the first job's rank 0).
inline std::string fresh_topology(int n, const std::string& rest) {
    std::string list = "{\"peers\": [";
    const char* sep = "";
    for (int port : free_ports(n)) {
        list += std::exchange(sep, ", ");
        list += "{\"host\": \"127.0.0.1\", \"port\": ";
        list += std::to_string(port);
        list += "}";
    }
    list += "], ";
    list += rest;
    list += "}";
    return list;
}

struct LaunchJob {
    TempDir dir;
    std::string topology, config, cluster;
    LaunchJob() {
        topology = dir.write("ring4.json", fresh_topology(4, R"("graph": {"family": "ring"})"));
        config = dir.write("train.json", R"({"seed": 3,
            "data": {"name": "logreg_synthetic", "samples": 800, "test_samples": 200, "features": 10, "seed": 5},
            "model": {"name": "softmax"}, "optimizer": {"name": "sgd", "lr": 0.2},
            "training": {"epochs": 3, "batch_size": 20, "target_accuracy": 0.6}})");
        cluster = dir.write("cluster.json", R"({"defaults": {"base_time": 0.005},
            "network": {"latency": 1e-5, "bandwidth": 1e9}})");
    }
    /// gossamer launch of this job with `extra` flags, without plots (they take seconds).
    RunResult launch(const std::string& extra) {
        return run(kBin + " launch --no-plots --topology " + topology + " --config " + config +
                   " --cluster " + cluster + " " + extra);
    }
};

}  // namespace gossamer::test
