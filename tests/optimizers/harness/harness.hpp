#pragma once
/// The one single-threaded driver for protocol tests (docs/operations/testing.md, "The protocol
/// harness"): N protocol objects of any registered algorithm, their workers and an in-memory
/// network in one thread, with a deterministic order of events (STYLE.md: UCC runs 16 contexts
/// in one thread). It never names an algorithm: the peers come from a worker factory and a
/// protocol factory (Peers), and the layers around a protocol are factories too.
///
/// Two clocks:
///  - Clock::ticks: the oldest event goes next and the clock advances by 1 per event (or, with
///    `shuffle`, a seeded random choice among every pending event, each (sender, receiver)
///    channel staying FIFO unless fifo_channels is off). Deadlines fire once the clock reaches
///    them; the clock jumps there when only deadlines are left.
///  - Clock::seconds: virtual time. A step takes its step time (step_times[rank], else
///    step_time, or step_time_of) plus seeded jitter; a message takes `delay` plus seeded jitter
///    (each channel keeps its order unless fifo_channels is off), `hold` adds to one message.
///    The earliest event goes next (ties: the oldest).
///
/// Events:
///  - start_step: compute_point(), x and the worker's gradient buffer are copied; when the step
///    is delivered they must be unchanged (the ownership rule, checked in every build type),
///    then the harness computes worker.compute_gradient(compute_point()) and calls
///    step_finished with the loss;
///  - sends: checked (the sender is the peer that sent it, the receiver another valid rank, the
///    payload empty or `elements` long, edge_seq 0, 1, ... per directed edge with
///    check_edge_seq), shown to on_send, changed by tamper, lost when drop says so; delivering
///    it calls message_arrived; the sender's send_completed follows (ticks: as a later event;
///    seconds: at the arrival time, ok unless the receiver is dead then; a dropped message
///    completes after `delay`), unless complete_sends is off;
///  - deadlines: delivered at their time;
///  - fail(rank), now: the rank gets no more events, messages to it are dropped (their senders
///    get send_completed(ok = false)), and every other live peer gets peer_failed(rank) at once;
///  - kill(rank, at): the rank dies at `at`; the others hear of it failure_notice later, and
///    messages that reach it are kept in undeliverable().
///
/// With zero_copy the harness acts as a zero-copy driver (Protocol::enable_zero_copy): a
/// borrowed send is read when it is sent, and its memory must be unchanged when its completion
/// is delivered; a message's payload is placed where the receiver's receive_into() says at the
/// moment it is sent (the earliest a transport could write it). With checkpoint_every, every
/// protocol takes snapshots (Protocol::enable_checkpoints) and the harness keeps them
/// (snapshots()); restore() starts a harness from them. Every check throws std::logic_error
/// starting "harness: ".

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gossamer/core/rng.hpp"
#include "gossamer/optimizers/protocol/protocol.hpp"

namespace gossamer::testing {

enum class Clock { ticks, seconds };

struct HarnessOptions {
    // The peers the harness builds (Peers); ignored when it is handed built ones.
    std::int64_t max_steps = 1;                            ///< PeerContext::max_steps
    std::shared_ptr<const topology::Schedule> topology{};  ///< PeerContext::topology
    double value_bound = 0;                                ///< PeerContext::value_bound

    // The order of events.
    Clock clock = Clock::ticks;
    std::uint64_t seed = 1;     ///< for shuffle and the jitters
    bool shuffle = false;       ///< ticks: a seeded random choice among the pending events
    bool fifo_channels = true;  ///< each (sender, receiver) channel keeps its order
    // Clock::seconds.
    double step_time = 1.0;
    std::vector<double> step_times{};  ///< per rank; missing entries take step_time
    double step_jitter = 0.0;          ///< extra uniform [0, step_jitter) per step
    double delay = 0.1;
    double delay_jitter = 0.0;     ///< extra uniform [0, delay_jitter) per message
    double failure_notice = 0.05;  ///< kill: from a death to peer_failed at the others

    // What the harness does and checks.
    bool complete_sends = true;  ///< deliver send_completed for every send
    bool check_edge_seq = false;
    bool log_payloads = true;              ///< keep payloads in sent() (off for big models)
    std::int64_t max_events = 10'000'000;  ///< run() throws past this (a protocol loops)
    bool zero_copy = false;                ///< act as a zero-copy driver (see above)
    std::int64_t checkpoint_every = 0;     ///< Protocol::enable_checkpoints before start
};

/// The default options on Clock::seconds.
inline HarnessOptions seconds_clock() {
    HarnessOptions o;
    o.clock = Clock::seconds;
    return o;
}

using WorkerFactory = std::function<std::unique_ptr<proto::LocalWorker>(int rank)>;
using ProtocolFactory = std::function<std::unique_ptr<proto::Protocol>(proto::PeerContext)>;
/// A layer around a peer's protocol: takes the protocol built so far (and its context) and
/// returns the one the harness drives.
using ProtocolLayer = std::function<std::unique_ptr<proto::Protocol>(
    std::unique_ptr<proto::Protocol>, const proto::PeerContext&)>;
/// A layer around a peer's worker (e.g. workers.hpp's GuardedWorker).
using WorkerLayer = std::function<std::unique_ptr<proto::LocalWorker>(
    std::unique_ptr<proto::LocalWorker>, int rank)>;

/// How the harness builds its peers. The multirate partitions of today are the worker's
/// (a LocalTrainer with a multirate config); the outer-optimizer layer of the next issues is a
/// ProtocolLayer. Layers apply innermost first.
struct Peers {
    int n = 0;
    WorkerFactory worker;
    ProtocolFactory protocol;
    std::vector<WorkerLayer> worker_layers{};
    std::vector<ProtocolLayer> protocol_layers{};
};

class Harness {
  public:
    /// Builds n peers: worker(rank) wrapped by worker_layers, then protocol(ctx) wrapped by
    /// protocol_layers, with ctx from the options.
    Harness(const Peers& peers, HarnessOptions options = {});
    /// The same with workers already built (one per rank).
    Harness(std::vector<std::unique_ptr<proto::LocalWorker>> workers, const ProtocolFactory& make,
            HarnessOptions options = {});
    /// Drives peers a test built and owns (they outlive the harness).
    Harness(std::vector<proto::Protocol*> protocols, std::vector<proto::LocalWorker*> workers,
            HarnessOptions options = {});
    Harness(Harness&&) = default;
    ~Harness();

    // Hooks.
    /// Called when peer `rank` is asked to start its step number `step` (0-based), before the
    /// step runs: the protocol's model is what its previous step and communication left.
    std::function<void(int rank, std::int64_t step)> on_step_start;
    /// Called with every message its sender's protocol let go (before tamper and drop).
    std::function<void(const proto::Message&)> on_send;
    /// Changes a message after on_send: a test's stand-in for a faulty link.
    std::function<void(proto::Message&)> tamper;
    /// True: the message is lost (never delivered).
    std::function<bool(const proto::Message&)> drop;
    /// Seconds: extra delay for one message, after its channel's order is fixed (it may
    /// overtake).
    std::function<double(const proto::Message&)> hold;
    /// Seconds: the duration of the step `rank` starts at `now` (overrides step_times).
    std::function<double(int rank, double now)> step_time_of;
    /// Called after every event.
    std::function<void()> after_event;

    /// Before run(): rank r resumes from `snapshot` (Protocol::restore).
    void restore(int rank, const proto::Snapshot& snapshot);
    /// Starts every peer (first call only), then delivers events until every live peer is done
    /// and nothing is pending, nothing is pending, or `stop()` (checked before each event) says
    /// so. Returns true when every live peer is done. Can be called again to continue.
    bool run(const std::function<bool()>& stop = {});
    /// Kills `rank` now (see the header comment).
    void fail(int rank);
    /// Kills `rank` at time `at` (see the header comment).
    void kill(int rank, proto::Time at);

    int size() const { return static_cast<int>(protocols_.size()); }
    proto::Protocol& protocol(int r) { return *protocols_[idx(r)]; }
    const proto::Protocol& protocol(int r) const { return *protocols_[idx(r)]; }
    /// The protocol of rank r as its concrete type.
    template <class P>
    P& as(int r) {
        return dynamic_cast<P&>(*protocols_[idx(r)]);
    }
    proto::LocalWorker& worker(int r) { return *workers_[idx(r)]; }
    bool alive(int r) const { return alive_[idx(r)]; }
    bool all_done() const;
    /// The model rank r reports now (current_model).
    std::vector<float> model(int r) const;

    proto::Time now() const { return now_; }
    std::int64_t events() const { return events_; }
    /// Every message sent so far, in send order (payloads cleared unless log_payloads).
    const std::vector<proto::Message>& sent() const { return sent_; }
    /// Messages sent and not yet delivered (nor dropped).
    std::vector<const proto::Message*> in_flight() const;
    /// Messages that reached a dead peer (kill).
    const std::vector<proto::Message>& undeliverable() const { return undeliverable_; }
    std::uint64_t dropped() const { return dropped_; }
    std::int64_t steps_started(int r) const { return steps_started_[idx(r)]; }
    /// Losses of rank r's finished steps, in order.
    const std::vector<double>& losses(int r) const { return losses_[idx(r)]; }
    /// Messages delivered to a peer while its step was running.
    std::int64_t delivered_while_stepping() const { return early_; }
    /// Step ends after which a peer that was not done did not start its next step at once.
    std::int64_t waits() const { return waits_; }
    std::int64_t deadlines() const { return deadlines_; }
    /// zero_copy: sends that read the protocol's memory, and messages placed by receive_into.
    std::int64_t borrowed_sends() const { return borrowed_sends_; }
    std::int64_t placed_messages() const { return placed_; }
    /// checkpoint_every: the snapshots rank r took, in order.
    const std::vector<proto::Snapshot>& snapshots(int r) const { return snapshots_[idx(r)]; }

  private:
    struct Event {
        enum Type { step, message, completed, deadline, kill, notice } type = step;
        int rank = 0;  // who receives the event
        int from = 0;  // message: the sender; completed: the receiver; notice: the dead rank
        proto::Message msg{};
        std::uint64_t id = 0;  // send or deadline id
        bool ok = true;        // completed (ticks)
        proto::Time at = 0;    // when it is due
    };
    struct Stepping {  // copies taken at start_step (the ownership rule)
        std::vector<float> point, x, gradient;
    };
    using Key = std::pair<double, std::uint64_t>;  // (due time in seconds, else 0; age)

    static std::size_t idx(int r) { return static_cast<std::size_t>(r); }
    [[noreturn]] static void fail_check(const std::string& what);
    void init();
    void push(Event e);
    Event completion(int rank, int to, std::uint64_t id, bool ok, proto::Time at);
    void apply(int r, proto::Actions& out);
    void send(int r, proto::Send s);
    void start_step(int r);
    void check_step(int r);
    double step_duration(int r);
    std::vector<Key> eligible();
    bool deliver_one();
    void dispatch(Event& e);
    std::vector<float> host(int r, std::span<const float> v) const;

    HarnessOptions options_;
    std::vector<std::unique_ptr<proto::LocalWorker>> owned_workers_;
    std::vector<std::unique_ptr<proto::Protocol>> owned_protocols_;
    std::vector<proto::LocalWorker*> workers_;
    std::vector<proto::Protocol*> protocols_;
    std::vector<bool> alive_;
    std::vector<std::int64_t> steps_started_;
    std::vector<std::vector<double>> losses_;
    std::vector<Stepping> stepping_;
    std::vector<std::vector<proto::Snapshot>> snapshots_;
    std::map<Key, Event> queue_;
    std::map<std::pair<int, int>, std::uint64_t> edge_seq_;
    std::map<std::pair<int, int>, double> last_arrival_;  // seconds: per channel
    std::vector<proto::Message> sent_, undeliverable_;
    // zero_copy: (rank, send id) -> the borrowed memory and the values it held when sent.
    std::map<std::pair<int, std::uint64_t>, std::pair<std::span<const float>, std::vector<float>>>
        lent_;
    Rng rng_;
    proto::Time now_ = 0;
    std::uint64_t next_seq_ = 0, dropped_ = 0;
    std::int64_t events_ = 0, early_ = 0, waits_ = 0, deadlines_ = 0;
    std::int64_t borrowed_sends_ = 0, placed_ = 0;
    bool started_ = false;
};

/// A protocol factory for the registry's algorithm `name` with `options` (a JSON text; "" for
/// the defaults), through proto::make_protocol.
ProtocolFactory registered(std::string name, const std::string& options = "");

}  // namespace gossamer::testing
