#pragma once
/// `gossamer bench trace`: what recording one timeline event costs (docs/formats/trace.md), beside
/// writing one metrics line, the cost a peer already pays per step, measured in the same run.

#include <cstdint>
#include <string>

#include "gossamer/core/json.hpp"

namespace gossamer::bench {

struct TraceCostOptions {
    std::int64_t events = 2'000'000;  ///< events recorded per repeat
    std::int64_t lines = 20'000;      ///< metrics lines written per repeat
    int repeats = 5;                  ///< alternated; the best of each side counts
    std::string dir;                  ///< where the files go (default: a temporary folder)
};

struct TraceCostReport {
    double record_ns = 0;        ///< per recorded event (wait, step, send, receive in turn)
    double write_ns = 0;         ///< per event, writing the trace file at the end
    double metrics_line_ns = 0;  ///< per metrics line written (MetricsWriter, flushed)
    std::uint64_t file_bytes = 0;
    std::int64_t events = 0;
    json::Json to_json() const;
    std::string to_text() const;
};

/// Runs the benchmark. Throws ConfigError when `dir` cannot be written.
TraceCostReport run_trace_cost(const TraceCostOptions& options);

}  // namespace gossamer::bench
