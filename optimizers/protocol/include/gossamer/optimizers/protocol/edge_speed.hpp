#pragma once
/// Measured out-edges (docs/algorithms/protocol-contract.md, "Measured edges"): delivered
/// throughput and latency of each edge from the peer's own send completions, never from a cluster
/// file.
///
/// A driver reports when a send was handed over (posted) and when it completed; the protocol
/// base class does that for every message (Protocol::edge_speeds()), in real peers from the
/// transport's completions and in the simulator from the simulated ones, so both run this very
/// estimator. Nothing here reads a clock.
///
/// - throughput (bytes/s): for a message of at least `large_bytes` wire bytes,
///   bytes / (completion - start); the EWMA of the bytes over the EWMA of the times (so a
///   message timed short because the one before it was reported early does not count more
///   than the slow one after it). `start` is the post time, or the previous
///   large message's completion on the same edge when that came later (an edge delivers its
///   messages one after another, so a message queued behind another is timed from when the
///   edge turned to it).
/// - latency (s): the EWMA of completion - post of messages of at most `small_bytes` wire bytes
///   (rate reports, control messages). Eager sends may complete before they arrive: on UCX this
///   is the sender's per-message cost, on an emulated link (peer pacing, the simulator) the
///   link's latency plus the tiny transfer.

#include <cstdint>
#include <optional>
#include <vector>

#include "gossamer/core/json.hpp"
#include "gossamer/optimizers/protocol/small_containers.hpp"

namespace gossamer::proto {

/// What is known about one out-edge (0: not measured yet).
struct EdgeSpeed {
    int peer = 0;
    double throughput = 0;           ///< bytes per second (EWMA), 0 until a large message
    double latency = 0;              ///< seconds (EWMA), 0 until a small message
    std::int64_t large_samples = 0;  ///< large messages measured
    std::int64_t small_samples = 0;  ///< small messages measured
    std::uint64_t bytes = 0;         ///< wire bytes of every completed send
    double last_throughput = 0;      ///< the latest large message's own throughput
    double last_large_done = -1;     ///< completion time of the latest large message
    double mean_bytes = 0;           ///< EWMA of large messages' bytes
    double mean_seconds = 0;         ///< EWMA of their times (throughput: their ratio)
    std::int64_t failed = 0;         ///< sends that completed with an error (not measured)

    bool measured() const noexcept { return large_samples > 0; }
};

struct EdgeSpeedOptions {
    double alpha = 0.3;                     ///< EWMA weight of a new sample, in (0, 1]
    std::uint64_t large_bytes = 64 * 1024;  ///< wire bytes from which a send times throughput
    std::uint64_t small_bytes = 4 * 1024;   ///< wire bytes up to which a send times latency
    /// The transport sends all of the peer's messages one after another through one queue (the
    /// simulator's uplink): a send is then timed from the latest completion of any send posted
    /// before it, on any edge. Otherwise (real transports, one connection per peer in
    /// parallel) edges are independent and only the same edge's earlier large send counts.
    bool one_queue = false;
    /// false: nothing is measured or kept (every call a no-op, every edge unmeasured). For a
    /// driver whose peer neither reports its edges nor acts on them (the simulator's peers
    /// without a peers.jsonl record, Protocol::acts_on_edge_speeds() false): a simulated job
    /// holds n of these, about 1.6 kB a peer on a one-peer exponential graph of 65,536 peers.
    bool measure = true;
};

/// Per-edge estimator. Edges appear on their first send. Single-threaded (a protocol's).
class EdgeSpeeds {
  public:
    explicit EdgeSpeeds(EdgeSpeedOptions options = {});

    /// Send `id` (unique, increasing) of `bytes` wire bytes to `to` was handed over at `at`.
    void posted(std::uint64_t id, int to, std::uint64_t bytes, double at);
    /// Send `id` left the driver for the transport at `at` (later than posted: the protocol's
    /// own work on the event that queued it is not the link's). Unknown ids are ignored.
    void handed_over(std::uint64_t id, double at);
    /// Send `id` completed at `at` (ok: delivered; else failed and not measured). An unknown id
    /// is ignored.
    void completed(std::uint64_t id, double at, bool ok);
    /// Replaces the options (a driver's, before any send: the simulator sets one_queue).
    /// Throws Error for alpha outside (0, 1] or small_bytes >= large_bytes.
    void configure(const EdgeSpeedOptions& options);
    /// Send `id` completed but is not to be timed (counted in bytes only).
    void forget(std::uint64_t id);
    /// One timed transfer directly (what posted + completed amount to, with no queueing).
    void observe(int to, std::uint64_t bytes, double posted_at, double done_at);

    /// The edge to `to`, or nullptr before its first completed send.
    const EdgeSpeed* find(int to) const;
    /// Throughput to `to` in bytes/s, 0 when not measured.
    double throughput(int to) const;
    /// Latency to `to` in s, 0 when not measured.
    double latency(int to) const;
    /// Seconds a message of `bytes` wire bytes takes to `to`: max(latency, bytes / throughput);
    /// nullopt before the edge's throughput is measured.
    std::optional<double> seconds_for(int to, std::uint64_t bytes) const;
    /// Sends posted and not completed yet.
    std::size_t in_flight() const noexcept { return pending_.size(); }
    const FlatMap<int, EdgeSpeed>& edges() const noexcept { return edges_; }
    const EdgeSpeedOptions& options() const noexcept { return options_; }
    /// One object per measured edge: {peer, throughput, latency, large_samples, small_samples,
    /// bytes, failed}.
    json::Json to_json() const;

  private:
    struct Pending {
        std::uint64_t id = 0;
        int to = 0;
        std::uint64_t bytes = 0;
        double at = 0;
    };
    EdgeSpeed& edge(int to);
    // queued: `start` already is when the send's turn came (one_queue).
    void sample(EdgeSpeed& e, std::uint64_t bytes, double start, double done, bool queued);

    EdgeSpeedOptions options_;
    FlatMap<int, EdgeSpeed> edges_;
    std::vector<Pending> pending_;  // ascending id: few in flight, a search and erase
    // one_queue: the largest send id completed so far and the latest completion time.
    std::uint64_t queue_done_id_ = 0;
    double queue_done_at_ = -1;
};

/// Merges measured speeds into a protocol's per-edge metrics: every object of `edges` (an array
/// of objects with "peer", or null) whose peer was measured gains "throughput", "latency" and
/// "link_samples"; measured peers it lacks are appended as {peer, out: true, ...}. Returns an
/// array (null when both are empty).
json::Json merge_edge_speeds(json::Json edges, const EdgeSpeeds& speeds);

}  // namespace gossamer::proto
