#pragma once
/// The discrete-event simulator: n peers running the same protocol objects as real peers, in
/// virtual time, on a cluster with heterogeneous compute and links (docs/modules/simulator.md).
///
/// Deterministic: the same setup and seed give the same events in the same order and the same
/// metrics, which hold virtual time only.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gossamer/core/cluster.hpp"
#include "gossamer/core/dataset.hpp"
#include "gossamer/core/json.hpp"
#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/optimizers/protocol/protocol.hpp"
#include "gossamer/optimizers/protocol/registry.hpp"
#include "gossamer/topology/schedule.hpp"

namespace gossamer::trace {
class Recorder;
}

namespace gossamer::sim {

/// real math: every virtual peer trains the real model on its shard; cost: no values, only
/// timing and traffic (for scale and throughput studies).
enum class Mode { math, cost };

struct SimSetup {
    std::string algorithm;              ///< "allreduce", "dpsgd", "sgp", ...
    std::optional<json::Node> options;  ///< the algorithm's options
    std::shared_ptr<const topology::Schedule> topology;
    const Cluster* cluster = nullptr;
    std::uint64_t seed = 1;  ///< step-time jitter (and data order: config)
    Mode mode = Mode::math;
    // Math mode.
    const optim::TrainingConfig* config = nullptr;  ///< model, optimizer, batch size, sharding
    const Dataset* train = nullptr;
    const Dataset* test = nullptr;
    int epochs = 1;                ///< passes of each peer over its shard
    Time eval_interval = 0;        ///< virtual seconds between evaluations
    int peer_eval_samples = 2000;  ///< test samples for per-peer accuracies
    /// Test samples for the exact average's accuracy at the evaluation ticks (0: the whole
    /// test set). The final evaluation always uses the whole set.
    int average_eval_samples = 0;
    // Cost-only mode.
    std::uint64_t model_size = 0;  ///< parameters (floats) per message
    std::int64_t steps = 0;        ///< local steps per peer
    // Both.
    Time failure_detection = 0;                      ///< seconds until neighbours hear of a failure
    std::function<void(std::string_view)> progress;  ///< called now and then with a status line
    /// Builds each peer's protocol instead of make_protocol(algorithm, options): a protocol
    /// outside the registry (tests, your own). Empty: the registry.
    std::function<std::unique_ptr<proto::Protocol>(proto::PeerContext)> protocol_factory;
    /// Per-peer records with the protocol's edge metrics: for ranks r with r % every == 0
    /// (1: all; 0: none). The scalar summary of every peer is kept either way.
    int peer_records_every = 1;
    /// Records the run's timeline here (docs/formats/trace.md) when set; it outlives simulate().
    trace::Recorder* trace = nullptr;
    /// Math mode: every EvalPoint also holds each live peer's distance to the mean
    /// (EvalPoint::distance; O(n) per evaluation, so off by default).
    bool peer_distances = false;
};

struct EvalPoint {
    Time time = 0;
    double accuracy = 0, loss = 0;              ///< of the exact average of the live peers' models
    double min_accuracy = 0, max_accuracy = 0;  ///< over the live peers' own models
    /// The mean of the live peers' own accuracies: what real peers' evaluation points measure
    /// (gossamer launch's time to target), on peer_eval_samples test samples.
    double mean_accuracy = 0;
    double mean_loss = 0;      ///< the mean of the same peers' own losses (time to a loss target)
    double consensus = 0;      ///< sqrt(mean_i ||x_i - mean||^2)
    std::int64_t samples = 0;  ///< samples processed by all peers so far
    std::uint64_t bytes = 0;   ///< bytes sent by all peers so far
    std::uint64_t backward_macs = 0;  ///< backward multiply-adds of all peers so far (math mode)
    int live = 0;  ///< live members evaluated (not down, not left, not waiting for a sponsor)
    /// With SimSetup::peer_distances: by rank, ||x_i - mean|| of each live member, -1 for the
    /// others (docs/operations/elastic.md).
    std::vector<double> distance;
};

struct PeerSummary {
    int rank = 0;
    std::int64_t steps = 0;
    Time busy = 0, idle = 0;  ///< computing / waiting (virtual seconds) until it finished
    double idle_share = 0;    ///< idle / (busy + idle)
    std::uint64_t bytes_sent = 0, bytes_received = 0;
    std::uint64_t messages_sent = 0;  ///< chunks count one each
    bool failed = false;              ///< down at the end (crashed and not back)
    bool left = false;                ///< left gracefully (leave_at; docs/operations/elastic.md)
    int joins = 0;                    ///< times it entered the running job (join_at, rejoin_at)
    double mass = 0;       ///< push-sum: the mass it holds at the end (1 for averaging protocols)
    json::Json edges;      ///< the protocol's per-edge metrics at the end (null if it keeps none)
    bool recorded = true;  ///< selected for a peers.jsonl record (SimSetup::peer_records_every)
    std::int64_t staleness_max = 0;   ///< the largest staleness of a share it absorbed (async)
    std::uint64_t backward_macs = 0;  ///< backward multiply-adds of its steps (math mode)
    /// Per partition: {"name", "updates", "backward_macs", "bytes_sent"} (math mode; null in
    /// cost mode).
    json::Json partitions;
    /// Under "outer" (docs/algorithms/outer.md; `steps` then counts rounds): the options in one
    /// line and the inner steps taken; "" and 0 without.
    std::string outer;
    std::int64_t inner_steps = 0;
};

/// A version of the topology in an elastic job: the live members after a change of membership
/// and the analysis of the live part the protocols mix over (topology::live_schedule).
struct TopologyVersion {
    int version = 0;  ///< 0: the members at t = 0
    Time time = 0;
    std::vector<int> live;
    std::optional<double> spectral_gap;
    bool connected = false;
    std::string line;  ///< topology::describe_live's
};

struct SimResult {
    std::string algorithm;
    std::uint64_t seed = 0;
    std::vector<EvalPoint> evals;  ///< math mode
    bool text = false;  ///< math mode on text data: losses are nats per character (bpc shown)
    std::vector<PeerSummary> peers;
    Time end_time = 0;  ///< when the last live peer finished
    std::int64_t samples = 0;
    std::uint64_t events = 0;  ///< events processed
    double wall_seconds = 0;   ///< real time the simulation took (not in metrics files)
    std::optional<int> stopped_by_failure;  ///< all-reduce: the rank whose failure stopped it
    double mass = 0;                        ///< push-sum: mass held by live peers at the end
    /// Push-sum: the job's total mass, one per peer present at t = 0 (n without late joiners: a
    /// joiner takes its mass from a sponsor, docs/operations/elastic.md).
    double mass_start = 0;
    double mass_lost = 0;  ///< push-sum: mass_start - mass (went with failed peers)
    /// Push-sum: the mass crashes took, measured by the simulator: what each peer held when it
    /// crashed and the shares that reached it while it was down. A graceful leave loses none,
    /// so mass_lost equals crash_loss up to rounding (docs/operations/elastic.md).
    double crash_loss = 0;
    /// Churning clusters (docs/operations/elastic.md): each membership the job went through, in
    /// order.
    std::vector<TopologyVersion> topology_versions;
};

/// Runs one simulation. Throws ConfigError for bad algorithm options or data that does not fit.
SimResult simulate(const SimSetup& setup);

}  // namespace gossamer::sim
