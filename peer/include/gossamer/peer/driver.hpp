#pragma once
/// The real-time driver of one peer (DESIGN.md, "The central idea"; docs/modules/peer.md): it runs
/// one protocol object over a Transport, with a compute thread for local steps and the calling
/// thread as the communication loop that delivers timestamped events to the protocol one at a
/// time and carries out its actions.
///
/// Threading: run() is called on the transport's communication thread; the protocol and the
/// transport are only touched there. The compute thread owns the point the gradient is computed
/// at and the worker's gradient between a start_step action and its step_finished event.

#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "gossamer/bootstrap/clock.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/core/json.hpp"
#include "gossamer/optimizers/protocol/protocol.hpp"
#include "gossamer/peer/compute_thread.hpp"
#include "gossamer/transport/transport.hpp"

namespace gossamer::peer {

using Millis = std::chrono::milliseconds;

/// An emulated link from this peer to another: sends on it wait until the link is free, take
/// bytes / bandwidth to go out, then `latency` more before the transport gets them.
struct LinkPacing {
    double latency = 0;    ///< seconds, >= 0
    double bandwidth = 0;  ///< bytes/s; 0: no cap
};

struct StepRecord;

/// Run() of an entering peer that no member admitted within DriverOptions::entry_timeout.
class EntryTimeout : public Timeout {
  public:
    using Timeout::Timeout;
};

struct DriverOptions {
    /// The whole run; past it run() throws Timeout naming what the protocol waits for.
    Millis run_timeout{3'600'000};
    /// With no progress for this long, log one line saying what the peer waits for (and again
    /// after each further period). Progress: a finished step, data that arrived or left, a
    /// failed peer, or an event after which the protocol starts a step, sends data or ends; not
    /// a deadline or control message that only leads to more (dpsgd's re-sync requests).
    Millis watchdog{10'000};
    /// With no progress for this long, run() throws Timeout (a peer that vanished unnoticed).
    Millis stall_timeout{120'000};
    /// After its last step a protocol may still wait for messages on their way (async: the
    /// in-neighbours' last shares, which arrive when the slowest of them finishes: no watchdog
    /// or stall timeout then, as in the exact average). Past this the peer stops waiting, logs
    /// which peers it waited for and ends with the mass it has.
    Millis settle_timeout{600'000};
    /// Whether to settle at all: only an exact average of the masses needs it (gossamer peer
    /// always averages; gossamer::Peer only with exact_average, so that a fast user loop's last
    /// step() returns when its own steps are done).
    bool settle = true;
    /// Per-step padding (heterogeneity emulation); empty: natural speed.
    DeclaredStepTime declared_step_time;
    /// Per-link pacing by destination rank (heterogeneity emulation); empty: sends go at once.
    std::function<LinkPacing(int to)> link;
    /// Emulated failure: at this many seconds after the start the peer stops at once, as a
    /// crashed process would (run() returns with failed set; the caller then drops the
    /// transport, which is what the other peers see).
    double fail_at = std::numeric_limits<double>::infinity();
    /// Elastic jobs (docs/operations/elastic.md): enter the running job with Protocol::join instead
    /// of start() (rejoin: keep the worker's model, resumed from a checkpoint).
    std::optional<proto::Entry> enter;
    /// An entering peer that has not started its first step this long after its start (no
    /// member admitted it: its sponsor finished training before the join reached it, as at the
    /// end of a job) gives up: run() throws EntryTimeout. 0: no limit.
    Millis entry_timeout{0};
    /// Ranks that are not live members when this peer starts or enters (Protocol::peer_absent).
    std::vector<int> absent;
    /// Polled each time the loop wakes; the first true asks the protocol to leave gracefully
    /// at its next step boundary (Protocol::leave; DriverResult::left).
    std::function<bool()> leave_requested;
    /// The same at this many seconds after the start (the cluster file's leave_at).
    double leave_at = std::numeric_limits<double>::infinity();
    /// The job's time origin (`gossamer peer --job-start`, set by gossamer launch for a
    /// cluster file with churn): fail_at, leave_at and the declared step times' slow periods
    /// count from it instead of from run()'s start, so a peer started late fails, leaves and
    /// slows down at the job's times (docs/operations/elastic.md). Metrics keep run()'s clock.
    std::optional<std::chrono::system_clock::time_point> job_start;
    /// JSON-lines metrics file (step, time, loss per step; a summary at the end); "" for none.
    std::string metrics_path;
    /// The peer's timeline (Chrome trace JSON, docs/formats/trace.md), written when run() ends; ""
    /// none.
    std::string trace_path;
    /// Bound on the trace's events in bytes; past it whole steps are sampled.
    std::size_t trace_limit = 64'000'000;
    /// This host's system clock against rank 0's (the bootstrap's estimate; {0, 0, 0} for
    /// threads of one process), written to the trace so that a merge aligns it to rank 0's.
    std::optional<bootstrap::ClockOffset> clock_offset;
    /// Called on the communication thread after each finished local step (a launcher's
    /// progress line); with several peers in one process it must be thread-safe. Empty: none.
    std::function<void(const StepRecord&)> on_step;
    /// Called on the communication thread each time the loop wakes, before it delivers events:
    /// where work other threads queued for the transport is done (JoinedPeer::apply_peer_losses
    /// fails the peers the bootstrap saw vanish). Empty: none.
    std::function<void()> poll;
    /// Called on the communication thread with each message as it arrives (from inside the
    /// transport's progress, until run() returns); a message it returns true for was taken by
    /// the caller and never reaches the protocol (the final average's messages from peers that
    /// finished training first). Empty: none.
    std::function<bool(transport::Message&)> intercept;
    /// Called on the communication thread each time the loop wakes and once before the
    /// summary; the records it returns are written to the metrics file, one line each (what
    /// other threads measured: gossamer peer's evaluations). Empty: none.
    std::function<std::vector<json::Json>()> extra_metrics;
    /// Called on the communication thread with each snapshot the protocol took at a cut
    /// (Protocol::enable_checkpoints; docs/operations/checkpoint.md), after the event that took it:
    /// where the caller writes its checkpoint. Empty: snapshots are dropped.
    std::function<void(proto::Snapshot&&)> on_snapshot;
};

/// One finished local step.
struct StepRecord {
    std::int64_t step = 0;
    double time = 0;  ///< seconds since the start, when the step finished
    double loss = 0;
    double took = 0;  ///< seconds, padding included
    /// `time` on the job's clock (DriverOptions::job_start; the same as `time` without one).
    double job_time = 0;
};

struct DriverResult {
    int rank = 0;
    std::int64_t steps = 0;  ///< local steps finished
    double end_time = 0;     ///< seconds from the start until the peer finished
    double busy = 0;         ///< seconds a step ran
    double idle = 0;         ///< end_time - busy
    std::vector<StepRecord> step_log;
    proto::ProtocolStats stats;
    json::Json edges;               ///< the protocol's edge_report() at the end
    std::vector<int> failed_peers;  ///< peers this one was told had failed, in order
    bool failed = false;            ///< this peer stopped at DriverOptions::fail_at
    bool left = false;              ///< it left the job gracefully (leave_requested)
};

class Driver {
  public:
    /// `worker` is the one in the protocol's PeerContext. All three outlive the driver.
    Driver(proto::Protocol& protocol, proto::LocalWorker& worker, transport::Transport& transport,
           DriverOptions options = {});

    /// Runs the peer until the protocol is done and its sends completed (or fail_at). Throws
    /// PeerFailure naming the failed rank when the all-reduce baseline stopped on a failure,
    /// Timeout after run_timeout or stall_timeout, and what the protocol throws.
    DriverResult run();

  private:
    proto::Protocol& protocol_;
    proto::LocalWorker& worker_;
    transport::Transport& transport_;
    DriverOptions options_;
};

}  // namespace gossamer::peer
