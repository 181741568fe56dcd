#pragma once
/// Decentralized algorithms as sans-I/O state machines (DESIGN.md, "The central idea").
///
/// A Protocol is one peer's algorithm. Its driver (the simulator in virtual time, a real peer in
/// real time) delivers timestamped events one at a time; the protocol answers with Actions:
/// messages to send, "start the next local step", deadlines. A protocol reads no clock, never
/// sleeps, starts no thread and includes no transport backend.
///
/// Ownership of the parameters: between a StartStep action and the matching step_finished event
/// the compute side owns the point the gradient is computed at (compute_point()) and the
/// worker's gradient buffer; the protocol must not touch them. Messages that arrive meanwhile go
/// into receive buffers and are mixed at the step boundary. In debug builds, params() asserts
/// this rule.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gossamer/core/json.hpp"
#include "gossamer/core/state_io.hpp"
#include "gossamer/optimizers/compress/compressor.hpp"
#include "gossamer/optimizers/local/worker.hpp"
#include "gossamer/optimizers/protocol/actions.hpp"
#include "gossamer/optimizers/protocol/channels.hpp"
#include "gossamer/optimizers/protocol/context.hpp"
#include "gossamer/optimizers/protocol/edge_speed.hpp"

namespace gossamer::proto {

class Protocol {
  public:
    explicit Protocol(PeerContext ctx);
    virtual ~Protocol() = default;
    Protocol(const Protocol&) = delete;
    Protocol& operator=(const Protocol&) = delete;

    virtual std::string_view name() const = 0;

    // Events. The driver calls exactly these, one at a time, with non-decreasing times.
    /// Once, before anything else.
    void start(Time now, Actions& out);
    /// The step begun by the last start_step action is done: gradient() holds its gradient.
    /// Throws Diverged when the loss is NaN or infinite (the peer must stop).
    void step_finished(Time now, double loss, Actions& out);
    /// A message that carries model values (any kind but control) is checked first: one with a
    /// NaN or an infinity is refused (Actions::refused, ProtocolStats::messages_refused) and its
    /// sender treated as failed at once, as if peer_failed had been delivered; every later
    /// message of that sender is dropped (and counted). Compressed payloads are checked by
    /// their codec (first_non_finite_value).
    void message_arrived(Time now, Message msg, Actions& out);
    /// `done_at` (<= now; < 0: now): when the transport reported the completion, if the
    /// driver stamped it before delivering the event (the measured edges time it).
    void send_completed(Time now, std::uint64_t id, bool ok, Actions& out, Time done_at = -1);
    void deadline_reached(Time now, std::uint64_t id, Actions& out);
    /// Ignored for a sender this protocol refused already (it took that failure itself).
    void peer_failed(Time now, int rank, Actions& out);
    /// Whether this protocol refused a message of `rank` and treats it as failed.
    bool refused_peer(int rank) const noexcept {
        return !refused_.empty() && std::binary_search(refused_.begin(), refused_.end(), rank);
    }

    /// Where the next gradient is computed: x (averaging protocols) or z = x / w (push-sum).
    /// Valid from a start_step action until step_finished.
    virtual std::span<const float> compute_point() = 0;
    /// The model this peer reports now (x, or z = x / w), size() values; math mode only.
    virtual void current_model(std::span<float> out) const = 0;
    /// Push-sum weight this peer holds (1 for averaging protocols).
    virtual double mass() const { return 1.0; }
    /// Per-edge metrics for the driver's output (staleness, shares, weights in use): a JSON
    /// array with one object per neighbour, or null when the protocol keeps none.
    virtual json::Json edge_metrics() const { return nullptr; }
    /// edge_metrics() with each measured out-edge's throughput and latency merged in
    /// (merge_edge_speeds): what drivers write as a peer's "edges".
    json::Json edge_report() const { return merge_edge_speeds(edge_metrics(), speeds_); }
    /// The out-edges measured from this peer's own send completions (edge_speed.hpp): every
    /// send is timed from the event that queued it to its send_completed. Read-only for
    /// protocols; drivers feed it by delivering completions.
    const EdgeSpeeds& edge_speeds() const noexcept { return speeds_; }
    /// True when the protocol's choices depend on edge_speeds() (link-aware async, per-edge
    /// compression): real drivers then stamp completions within 2 ms of when they happen.
    virtual bool acts_on_edge_speeds() const { return false; }
    /// Drivers: send `id` was handed to the transport at `at`, later than the event that queued
    /// it (the measured edges time it from then; EdgeSpeeds::handed_over).
    void send_handed_over(std::uint64_t id, Time at) { speeds_.handed_over(id, at); }
    /// Drivers, before start(): how the transport queues sends (EdgeSpeedOptions::one_queue).
    void configure_edge_speeds(const EdgeSpeedOptions& options) { speeds_.configure(options); }
    /// Called by a driver before start() when it honours zero-copy: it sends Send::borrowed
    /// memory as the payload (and keeps it until send_completed), and asks receive_into() where
    /// a message's payload should land. Drivers that do neither (sim, the test harnesses)
    /// never call it, and every message then owns its payload.
    void enable_zero_copy() noexcept { zero_copy_ = true; }
    bool zero_copy() const noexcept { return zero_copy_; }
    /// Zero-copy receives: where the payload of a message with this header should be written
    /// (exactly header.elements values that the protocol leaves alone until the message is
    /// delivered with `placed` set), or empty for a buffer the message owns. Called on the
    /// communication thread between events, possibly long before the message is delivered.
    virtual std::span<float> receive_into(const Message&) { return {}; }
    /// Where the values of a message that arrived `placed` are (the span receive_into gave for
    /// its header), for the finiteness check before on_message; protocols that place override.
    virtual std::span<const float> placed_values(const Message&) const { return {}; }

    /// A NaN or an infinity a message carries: its index among the values and the value.
    struct NonFinite {
        std::size_t index = 0;
        float value = 0;
    };
    /// The first non-finite value that `msg` (a message of model values, sent or received;
    /// its values are `values`: the payload, placed or borrowed memory) carries, or nullopt when
    /// all are finite or the message is malformed (on_message refuses that). The default reads
    /// codec-0 payloads as raw float32 values and leaves other codecs alone; protocols whose
    /// payloads are compressed under codec 0 (dpsgd's and choco's channels) override it and
    /// ask the compressor (Compressor::first_non_finite).
    virtual std::optional<NonFinite> first_non_finite_value(const Message& msg,
                                                            std::span<const float> values) const;
    /// Whether a message's payload is codec words rather than float32 values: codec != 0 by
    /// default; dpsgd and choco also for deltas of a channel with a compressor. The value bound
    /// (PeerContext::value_bound) applies to model values only.
    virtual bool compressed(const Message& msg) const { return msg.codec != 0; }
    /// Partition `id` of worker().partitions() is final for the running step
    /// (docs/algorithms/protocol-contract.md, "Partition-ready"): the compute side will neither
    /// read x's range of it nor write its gradient again before step_finished, so both belong to
    /// the protocol from now on. Only while a step runs; a partition declared twice counts once.
    /// Throws Error for an unknown partition or outside a step; step_finished throws Error when the
    /// compute side changed a ready partition's gradient after all (the ownership rule, checked in
    /// every build).
    void partition_ready(Time now, std::uint32_t id, Actions& out);
    /// Whether the protocol acts on partition_ready: drivers deliver the events only then.
    virtual bool takes_partition_ready() const { return false; }
    /// Whether partition id was declared ready in the running step.
    bool partition_is_ready(std::size_t id) const noexcept {
        return id < ready_.size() && ready_[id] != 0;
    }
    /// True between a start_step action and its step_finished.
    bool stepping() const noexcept { return stepping_; }
    /// True once the protocol returned done.
    bool done() const noexcept { return done_; }
    /// After done: whether nothing more is on its way that the protocol must still take. A
    /// driver keeps delivering messages and peer failures to a done protocol until it is settled
    /// (async: every live in-neighbour's last share; docs/modules/peer.md, "Leaving"). Most
    /// protocols are settled once done.
    virtual bool settled() const { return done_; }
    /// While done and not settled: the ranks it still waits for (for a log line).
    virtual std::vector<int> settling_on() const { return {}; }
    /// True when the protocol keeps at most one data message (any kind but control) in flight
    /// per directed edge (sgp and async with an outbox): the drivers then deliver its send
    /// completions (the simulator only then) and throw an Error naming the edge if it ever has
    /// two in flight on one edge.
    virtual bool one_in_flight_per_edge() const { return false; }
    /// Messages the protocol holds back to send later (an outbox waiting for its edge). A driver
    /// keeps running, delivering send completions, until there are none, done or not.
    virtual std::size_t unsent() const { return 0; }
    const ProtocolStats& stats() const noexcept { return stats_; }

    // Checkpoints and resume (docs/operations/checkpoint.md; protocol_state.cpp).
    /// "" when this protocol, with its options and worker, saves a consistent cut and resumes
    /// from it bit for bit (dpsgd, allreduce) or with its mass exact (sgp, async); else one line
    /// saying why not, naming the algorithm.
    virtual std::string resume_refusal() const;
    /// Before start(): take a snapshot at every `every`-th step (0: none). Throws ConfigError
    /// with resume_refusal() when the protocol cannot.
    void enable_checkpoints(std::int64_t every);
    std::int64_t checkpoint_every() const noexcept { return checkpoint_every_; }
    /// The snapshot taken at the latest cut, once (a driver writes it after the event that took
    /// it); nullopt when there is no new one.
    std::optional<Snapshot> take_snapshot();
    /// Before start(): the worker's and the protocol's state of a snapshot (from a checkpoint
    /// labelled `label` in errors); start() then carries on from the cut. Throws ConfigError
    /// naming the label when the state does not fit this protocol, its options or its worker.
    void restore(const std::string& label, std::string_view state);
    /// The step restore() resumed at (0: a fresh start).
    std::int64_t resumed_at() const noexcept { return resumed_at_; }

    // Elastic jobs: join, graceful leave, rejoin (docs/operations/elastic.md). Ranks stay stable;
    // the live members define the live part of the topology. Protocols that cannot
    // (elastic_refusal()) throw Error from these.
    /// "" when the protocol can join and leave a running job; else one line naming the
    /// algorithm and what to use instead.
    virtual std::string elastic_refusal() const;
    /// Whether one peer's failure stops the whole job (all-reduce without "elastic": its ring
    /// cannot go on) rather than being gossiped or rebuilt around; drivers then name the failed
    /// rank (the simulator's SimResult::stopped_by_failure).
    virtual bool failure_stops_job() const { return false; }
    /// The rank whose failure stopped this protocol, once one did (failure_stops_job()); the
    /// real-time driver then throws PeerFailure naming it.
    virtual std::optional<int> stopped_by() const { return std::nullopt; }
    /// Before start() or join(): `rank` is not a live member now (it joins later, it left, or
    /// it failed). The protocol neither sends to it nor waits for it until it announces itself.
    void peer_absent(int rank);
    /// Instead of start(): this peer enters a running job. It asks a sponsor (its lowest live
    /// neighbour rank) for half of the sponsor's state and starts stepping when that arrives;
    /// `entry` says whether it takes the sponsor's model (fresh) or keeps the worker's (rejoin:
    /// its checkpoint's, or the model it had at its crash). Throws Error when no neighbour is
    /// live.
    void join(Time now, Entry entry, Actions& out);
    /// Graceful leave, at the next step boundary: the peer hands its whole state to its live
    /// neighbours, tells every neighbour, passes on what still reaches it and returns done once
    /// nothing more can (its neighbours then count it absent).
    void leave(Time now, Actions& out);
    /// Between join() and the sponsor's answer (the model is not defined yet).
    bool joining() const noexcept { return joining_; }
    /// Push-sum: all the mass this peer would lose in a crash, mass() plus receive buffers and
    /// shares waiting to be sent; drivers measure the mass a crash loses with it. 0 for
    /// averaging protocols, which have no mass to lose.
    virtual double held_mass() const { return 0.0; }

    int rank() const noexcept { return ctx_.rank; }
    int n() const noexcept { return ctx_.n; }

  protected:
    virtual void on_peer_absent(int) {}
    virtual void on_join(Time, Entry, Actions&);
    virtual void on_leave(Time, Actions&);
    /// The sponsor's state arrived: the peer is a member and its model is defined.
    void mark_admitted() noexcept { joining_ = false; }
    virtual void on_start(Time now, Actions& out) = 0;
    virtual void on_step_finished(Time now, double loss, Actions& out) = 0;
    virtual void on_message(Time now, Message msg, Actions& out) = 0;
    virtual void on_send_completed(Time, std::uint64_t, bool, Actions&) {}
    virtual void on_deadline(Time, std::uint64_t, Actions&) {}
    virtual void on_peer_failed(Time, int, Actions&) {}
    virtual void on_partition_ready(Time, std::uint32_t, Actions&) {}

    /// x, asserting (debug builds) that no step is running.
    std::span<float> params();
    /// True when no step runs, or every partition overlapping [offset, offset + size) was
    /// declared ready in the running step: the range is the protocol's (partition_ready).
    bool range_ready(std::size_t offset, std::size_t size) const;
    /// x's range [offset, offset + size), asserting (debug builds) range_ready.
    std::span<float> ready_params(std::size_t offset, std::size_t size);
    /// out <- x, from host memory or downloaded from the worker's device: current_model() of
    /// the protocols that report x itself.
    void copy_params_to(std::span<float> out) const;
    LocalWorker& worker() { return *ctx_.worker; }
    const PeerContext& context() const noexcept { return ctx_; }
    /// Queues a message and counts it. Throws Diverged when an uncompressed payload of model
    /// values holds a NaN or an infinity: this peer's own model diverged.
    void send(Actions& out, Message msg);
    /// Queues a message whose payload is `values` of the protocol's own memory (zero-copy
    /// drivers only, see enable_zero_copy); returns its send id.
    std::uint64_t send_borrowed(Actions& out, Message msg, std::span<const float> values);
    ProtocolStats& mutable_stats() noexcept { return stats_; }
    /// A protocol's cut after `step` local steps: every message of an earlier round it must
    /// take has been taken, and nothing of a later round has been sent or applied (queued
    /// messages of later rounds are not saved: their senders send them again after a resume).
    /// Takes a snapshot when `step` is a checkpoint step (checkpoint_due).
    void cut(std::int64_t step);
    /// Whether step is a checkpoint step: a multiple of checkpoint_every(), > 0 and before the
    /// last step.
    bool checkpoint_due(std::int64_t step) const noexcept;
    /// The protocol's own state at a cut (the worker's is saved before it) and its restore.
    virtual void save_state(StateWriter&) const {}
    virtual void restore_state(StateReader&) {}

  private:
    void after(Actions& out);
    /// "" when msg's values are finite (or not this layer's to check); else what is wrong.
    std::string non_finite_value(const Message& msg) const;
    void check_outgoing(const Message& msg, std::span<const float> values) const;
    void measure_own_scale();

  protected:
    /// For first_non_finite_value overrides: what `q` (nullptr: raw floats) finds in values
    /// encoded from n values.
    static std::optional<NonFinite> non_finite_in(const optim::Compressor* q,
                                                  std::span<const float> values, std::size_t n);

  private:
    PeerContext ctx_;
    ProtocolStats stats_;
    EdgeSpeeds speeds_;
    Time event_time_ = 0;  // the event being handled: when its sends were queued
    bool stepping_ = false;
    bool done_ = false;
    bool zero_copy_ = false;
    bool joining_ = false;
    std::uint64_t next_send_id_ = 1;
    // partition_ready: per partition, declared in the running step, and its gradient's hash then.
    std::vector<char> ready_;
    std::vector<std::uint64_t> ready_hash_;
    void check_ready_unchanged() const;
    std::int64_t checkpoint_every_ = 0, resumed_at_ = 0;
    std::optional<Snapshot> snapshot_;
    // Ranks a message of which was refused (they count as failed), sorted: usually none, and a
    // simulated job holds n protocols, so not a flag per rank (n^2 bytes in all).
    std::vector<int> refused_;
    double own_scale_ = 1;  // value_bound on: max(1, max |x|) at the last step boundary
};

}  // namespace gossamer::proto
