#pragma once
// The simulator's engine (private to sim/src): events, virtual peers and the Engine class.
// simulation.cpp runs events; actions.cpp plays a peer's actions; churn.cpp lets peers join, leave
// and rejoin (docs/operations/elastic.md).

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <variant>
#include <vector>

#include "gossamer/core/compute_model.hpp"
#include "gossamer/optimizers/protocol/action_applier.hpp"
#include "gossamer/optimizers/protocol/protocol.hpp"
#include "gossamer/sim/edge_lines.hpp"
#include "gossamer/sim/event_queue.hpp"
#include "gossamer/sim/fair_network.hpp"
#include "gossamer/sim/network.hpp"
#include "gossamer/sim/simulation.hpp"
#include "sim_trace.hpp"

namespace gossamer::sim::detail {

// Events of a peer carry its incarnation (`life`, Peer::life): after a crash and a rejoin
// (docs/operations/elastic.md), what the old incarnation started or was sent is dropped.
struct StepDone {
    int rank;
    double loss;
    int life;
};
struct Arrival {
    int rank;
    std::uint32_t message;  // index into Engine::messages_
    int life;               // the receiver's when the message was sent
};
struct DeadlineEvent {
    int rank;
    std::uint64_t id;
    int life;
};
struct Failure {
    int rank;
};
struct FailureNotice {
    int rank, dead, life;  // life: the dead peer's incarnation that failed
};
// Elastic jobs (churn.cpp): the peer enters (join_at, or rejoin_at after its crash) or leaves
// gracefully (leave_at).
struct Join {
    int rank;
};
struct Leave {
    int rank;
};
struct Evaluate {};
// The sender's uplink is done with a message (Transfer::sent): every send's, so that the
// protocol's measured edges (Protocol::edge_speeds) time the simulated completions as a real
// peer's time the transport's; protocols that keep one message in flight per edge
// (Protocol::one_in_flight_per_edge) also free the edge on it.
struct SendDone {
    int rank;
    int counted;  // the receiver when the message counts against the edge bound, else -1
    std::uint64_t id;
    int life;
};
// The fair-share network: a flow ends, unless a later rate change moved it (version stale);
// flows started or ended at this instant get their rates (one recomputation per instant).
struct FlowEnd {
    std::uint32_t flow, version;
};
struct Settle {};
// Partition `id` of step `step` is final (Protocol::partition_ready), for protocols that take it.
struct PartitionReady {
    int rank;
    std::uint32_t id;
    std::int64_t step;
    int life;
};
using Event = std::variant<StepDone, Arrival, DeadlineEvent, Failure, FailureNotice, Evaluate,
                           SendDone, FlowEnd, Settle, PartitionReady, Join, Leave>;

// A message on the fair-share network, by flow id: what its end delivers.
struct Flowing {
    int rank, to, counted;  // counted: as in SendDone
    std::uint64_t id;
    std::uint32_t message;
    int life_from, life_to;  // the sender's and the receiver's incarnations at the send
    std::uint64_t bytes = 0;
};

struct Peer {
    std::unique_ptr<Dataset> shard;              // math mode: the samples its trainer reads
    std::unique_ptr<proto::LocalWorker> inner;   // under "outer": the trainer the layer drives
    std::unique_ptr<proto::LocalWorker> worker;  // what the protocol drives
    std::unique_ptr<proto::Protocol> protocol;
    // Applies and checks its protocol's actions (the bound on data messages in flight per edge)
    // and knows whether it is done.
    proto::ActionApplier applier{{"peer", true}};
    bool alive = true, stepping = false;
    std::int64_t started = 0;      // inner steps started
    std::int64_t round_steps = 1;  // inner steps of the running protocol step ("outer": a round)
    // Under "outer", for the trace: the running round's index, its first inner step (the
    // worker's count) and each inner step's end (ComputeModel's).
    std::int64_t round = 0, first_inner = 0;
    std::vector<Time> inner_ends;
    Time busy = 0, idle = 0, idle_since = 0, step_start = 0, step_end = 0;
    // Elastic jobs (churn.cpp).
    int life = 0;                    // incarnation: one more at each rejoin
    int joins = 0;                   // times it entered a running job (join_at, rejoin_at)
    bool crashed = false;            // failed and not back yet: its next join is a rejoin
    bool left = false;               // left gracefully (at leave_at)
    std::vector<float> crash_model;  // the model it had at its crash (math mode)
    // The evaluation tick (its index in the result's evals) this peer's own model is still to
    // be judged for, at its next step boundary, as a real peer does (docs/modules/simulator.md);
    // -1: none. A later tick replaces an earlier one, as a real peer's evaluator queue does.
    std::int64_t eval_pending = -1;
    std::uint64_t past_sent = 0, past_received = 0, past_messages = 0;  // earlier incarnations
};

class Engine {
  public:
    explicit Engine(const SimSetup& s);
    SimResult run();

  private:
    /// Applies rank's actions through its ActionApplier: the pieces below do each.
    void apply(int rank, Time now, proto::Actions& a);
    void refused(int rank, Time now, const proto::Refusal& r);
    void send(int rank, Time now, proto::Send& send, bool counted);
    void start_step(int rank, Time now);
    void peer_done(int rank, Time now);  // its protocol's first done
    void handle(Time now, Event& e);
    void evaluate(Time now, bool final);
    /// Judges `rank`'s own model for its pending tick, at its step boundary `now`.
    void judge_pending(int rank, Time now);
    /// The accuracy and loss of one peer's model on the peer test set; a model equal to one of
    /// the latest judged since the tick (every replica of allreduce) is judged once.
    std::pair<double, double> judge(std::span<const float> x);
    /// Each tick's per-peer mean, min and max accuracy and mean loss, from the peers judged for
    /// it so far.
    struct TickSums {
        double sum = 0, min = 1, max = 0, loss_sum = 0;
        int count = 0;
        void add(std::pair<double, double> judged) {
            const auto [acc, loss] = judged;
            sum += acc;
            loss_sum += loss;
            min = std::min(min, acc);
            max = std::max(max, acc);
            ++count;
        }
    };
    std::vector<float> pending_model_;  // judge_pending's copy of a peer's model, reused
    std::vector<TickSums> tick_sums_;   // by index of result_.evals
    // The latest models judged, with their (accuracy, loss).
    std::vector<std::pair<std::vector<float>, std::pair<double, double>>> judged_;
    void finish_ticks();
    /// Partition-ready events of rank's step [start, end), for protocols that take them.
    void schedule_ready(int rank, Time start, Time end);
    bool active() const;
    /// The one Actions object every event reuses, emptied: its vectors keep their capacity, so
    /// an event costs no allocation (docs/modules/simulator.md, "Scale").
    proto::Actions& fresh_actions();
    /// Messages in flight live out of the event queue's slots, which then stay small (a
    /// deadline or a step end does not carry a Message's worth of bytes). A notice (a message
    /// of header fields only: async's "finished", Notice) waits in a pool of 32-byte entries
    /// instead of 112-byte Messages, its index tagged with kNoticeIndex.
    std::uint32_t hold(transport::Message&& m);
    transport::Message take(std::uint32_t index);
    /// Fair network: a Settle event at `now` unless one is queued.
    void unsettle(Time now);

    // Elastic jobs (churn.cpp).
    /// Join, Leave and rejoin events of the cluster file; the ranks absent at t = 0.
    void schedule_churn();
    /// Tells `rank`'s protocol, before it starts or joins, which ranks are not live members.
    void tell_absent(int rank);
    bool any_absent_ = false;  // a peer was ever down, late or gone: tell_absent has to look
    void join(int rank, Time now);
    void leave(int rank, Time now);
    /// A crash: the mass the peer held is lost, and its model is kept for a rejoin.
    void crash(int rank);
    /// Records a topology version when the live members changed (churn.cpp).
    void note_membership(Time now);
    bool track_versions_ = false;
    /// A message that reaches a peer that is down (or the incarnation it was sent to is gone):
    /// the mass it carries is lost.
    void drop(const transport::Message& m);
    /// Whether the peer takes events now, as the incarnation `life`.
    bool live(int rank, int life) const;
    std::unique_ptr<proto::Protocol> make(int rank);

    const SimSetup& s_;
    const int n_;
    ComputeModel compute_;
    Network network_;
    std::optional<FairNetwork> fair_;  // the network model unless the cluster asks for fifo
    bool settle_queued_ = false;
    std::vector<FairNetwork::Update> flow_updates_;
    std::vector<Flowing> flowing_;  // by flow id
    // Messages of one directed edge travel one after another, as over the one TCP connection of
    // a real endpoint: only the front of an edge's line is a flow, the others wait for it.
    // (Fair sharing is between edges.) Keyed by from * n + to; lines of busy edges only.
    EdgeLines<Flowing> edge_lines_;
    std::uint64_t edge_key(int from, int to) const {
        return static_cast<std::uint64_t>(from) * static_cast<std::uint64_t>(n_) +
               static_cast<std::uint64_t>(to);
    }
    void start_flow(const Flowing& f, Time now);
    EventQueue<Event> queue_;
    std::vector<Peer> peers_;
    std::unique_ptr<Model> eval_model_;
    Dataset peer_test_;
    Dataset average_test_;  // the exact average's test set at the ticks (the final: s_.test)
    SimResult result_;
    std::int64_t pending_ = 0;     // events other than evaluations
    int active_ = 0;               // peers alive and not done: active() is O(1) per event
    std::int64_t peer_steps_ = 0;  // local steps finished, over all peers (progress)
    bool any_failed_ = false;
    double crash_loss_ = 0;           // push-sum mass lost with crashes, measured here
    int starters_ = 0;                // peers present at t = 0: the job's total mass
    Time last_step_ = 0;              // when a step last finished
    Time stall_after_ = 600;          // virtual seconds without a step that count as a stall
    std::int64_t steps_ = 0;          // local steps per peer (the protocols' max_steps)
    proto::EdgeSpeedOptions speeds_;  // what every protocol is configured with, but:
    /// A peer measures its edges only when it reports them (a peers.jsonl record) or its
    /// protocol acts on them: nothing else reads them (docs/modules/simulator.md, "Scale").
    proto::EdgeSpeedOptions speeds_for(int rank) const {
        proto::EdgeSpeedOptions o = speeds_;
        const int every = s_.peer_records_every;
        o.measure = (every > 0 && rank % every == 0) ||
                    peers_[static_cast<std::size_t>(rank)].protocol->acts_on_edge_speeds();
        return o;
    }
    proto::Actions actions_;
    std::vector<transport::Message> messages_;
    std::vector<std::uint32_t> free_messages_;
    // When a homogeneous async job ends every peer tells every neighbour at once: n times the
    // degree of these are in flight together (docs/modules/simulator.md, "Scale").
    struct Notice {
        std::int64_t round;
        std::uint64_t edge_seq;
        int sender, receiver;
        std::uint32_t chunk;
        transport::MessageKind kind;
    };
    static constexpr std::uint32_t kNoticeIndex = 1u << 31;
    std::vector<Notice> notices_;
    std::vector<std::uint32_t> free_notices_;
    SimTracer trace_;
    std::int64_t outer_h_ = 1;  // "outer": inner steps per round (the trace's round index)
    // The trace of the running step of `p` ended (or cut by a crash) at `end`.
    void trace_step(int rank, const Peer& p, Time end, double loss);
};

}  // namespace gossamer::sim::detail
