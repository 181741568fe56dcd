#pragma once
// The job the gossamer launch tests run: the synthetic job of test_sim_cli.cpp, 4 peers on a
// ring, logistic regression, 3 epochs, on a fast homogeneous cluster (30 steps of 5 ms per peer).

#include <string>

#include "support/run.hpp"
#include "support/temp_dir.hpp"

namespace gossamer::test {

inline const std::string kBin = GOSSAMER_BINARY;

struct LaunchJob {
    TempDir dir;
    std::string topology, config, cluster;
    LaunchJob() {
        topology =
            dir.write("ring4.json", R"({"peers": {"count": 4}, "graph": {"family": "ring"}})");
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
