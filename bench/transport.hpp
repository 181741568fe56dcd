#pragma once
/// `gossamer bench transport`: point-to-point bandwidth and latency of the UCX backend between
/// two processes with their own UCX contexts and workers, beside ucx_perftest (ucp_am_bw,
/// ucp_am_lat) run as two processes on localhost with the same UCX_TLS.

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "gossamer/core/json.hpp"

namespace gossamer::bench {

struct TransportBenchOptions {
    std::vector<std::size_t> sizes;           ///< payload bytes (default 4 KiB .. 64 MiB, x4)
    std::size_t bytes_per_size = 1ull << 30;  ///< bytes moved per size (iterations 20 .. 20000)
    int latency_iterations = 20000;           ///< 8-byte ping-pongs
    int window = 16;                          ///< most sends in flight in the bandwidth test
    /// ... and at most this many bytes (at least one message): small messages are pipelined,
    /// from 1 MiB on one is in flight and lands in one receive buffer, as in ucx_perftest
    std::size_t window_bytes = 1u << 20;
    int repeats = 3;  ///< runs of each side per row, alternated; the best counts (shared CPUs)
    bool reference = true;    ///< run ucx_perftest beside
    bool peer_errors = true;  ///< UCX error handling (ErrorHandling::peer; ucx_perftest -e)
    std::string perftest = "ucx_perftest";
    std::function<void(std::string_view)> progress;  ///< told before each row (may be empty)
};

struct BandwidthRow {
    std::size_t bytes = 0;
    int iterations = 0;
    int window = 0;        ///< sends in flight
    double gossamer = 0;   ///< GB/s (1e9 bytes)
    double reference = 0;  ///< GB/s; 0 when not measured
    /// which ucx_perftest run gave it: "ucx" (UCX's protocol choice) or "eager" (forced)
    std::string reference_protocol;
    double target = 0;  ///< minimum ratio (0.9 at >= 1 MiB; 0: none)
};

struct TransportReport {
    std::vector<BandwidthRow> bandwidth;
    double latency_us = 0;            ///< one way: half of the 8-byte round trip
    double send_completion_us = 0;    ///< send call -> its send-completion callback, 8 bytes
    double reference_latency_us = 0;  ///< ucx_perftest ucp_am_lat; 0 when not measured
    double latency_target = 2.0;      ///< maximum ratio
    int repeats = 1;
    std::string ucx_tls;  ///< UCX_TLS in effect ("" = UCX's choice)
    bool peer_errors = true;
    std::string reference_error;  ///< why the reference did not run
    json::Json to_json() const;
    std::string to_text() const;
};

/// Runs the measurements; throws gossamer::Error when UCX cannot start or a run times out.
TransportReport run_transport(const TransportBenchOptions& options);

}  // namespace gossamer::bench
