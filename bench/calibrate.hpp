#pragma once
/// `gossamer bench calibrate`: measures this machine's local step time for a training config
/// and the bandwidth and latency of the UCX link between two local peers, and writes them as a
/// cluster file (docs/formats/cluster-format.md) for `gossamer sim --cluster`.

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "gossamer/core/json.hpp"

namespace gossamer::bench {

struct CalibrateOptions {
    std::string config;  ///< the training config (docs/formats/train-config.md)
    std::string out;     ///< the cluster file to write ("" writes none)
    int peers = 1;       ///< shard the data for this many peers, as a real run would
    int steps = 30;      ///< timed local steps (after `warmup` untimed ones)
    int warmup = 5;
    int threads = 1;          ///< BLAS threads, as a peer of `gossamer launch` has
    bool peer_errors = true;  ///< UCX error handling, as real peers run (TCP loopback here)
    std::size_t link_bytes = 4u << 20;  ///< message size of the bandwidth measurement
    std::function<void(std::string_view)> progress;
};

struct CalibrateReport {
    std::string config, model;
    int batch = 0, steps = 0, threads = 1;
    double step_median = 0, step_min = 0, step_p90 = 0;  ///< seconds per local step
    double bandwidth = 0;                                ///< bytes/s between two local UCX peers
    double latency = 0;                                  ///< seconds one way, 8-byte messages
    bool peer_errors = true;
    std::string out;     ///< the file written ("" when none)
    json::Json cluster;  ///< what it holds
    json::Json to_json() const;
    std::string to_text() const;
};

/// Throws ConfigError for a bad config (nothing is written), Error when UCX cannot run.
CalibrateReport run_calibrate(const CalibrateOptions& options);

}  // namespace gossamer::bench
