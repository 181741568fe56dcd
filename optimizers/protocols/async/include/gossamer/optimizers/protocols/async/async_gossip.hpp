#pragma once
/// async: wait-free push-sum with straggler-aware, sender-side weights
/// (docs/algorithms/protocol-contract.md, "async"; the weights are derived in
/// docs/algorithms/async.md).
///
/// Each peer carries (x, w), w = 1 at the start, and computes its gradient at z = x / w. It never
/// waits: when step t ends it applies the gradient to x, adds the shares that arrived during the
/// step, keeps (s x, s w) and pushes ((1 - s)/k x, (1 - s)/k w) to each of k targets chosen
/// among its base out-neighbours, then starts step t + 1 at once. Shares are never dropped: the
/// sum of w over peers, receive buffers and messages in flight is n at every moment (minus what
/// failed peers held).
///
/// Straggler awareness (sender side only): s grows as the peer is slower than its neighbours
/// (straggler_self_share), and targets are sampled with probability proportional to
/// rate^target_power, while every base out-edge is used at least once in every edge_bound()
/// consecutive steps. Rates are measured from event timestamps: the peer's own step boundaries,
/// and for a neighbour the sender step counts (Message::round) of its shares over their arrival
/// times.
///
/// Deadlines are for metrics only: a neighbour whose next share has not come within the
/// deadline_percentile quantile of its recent inter-arrival times (at most deadline_cap seconds)
/// is counted late; its share is still absorbed when it comes.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gossamer/core/json.hpp"
#include "gossamer/core/rng.hpp"
#include "gossamer/optimizers/protocol/growing_window.hpp"
#include "gossamer/optimizers/protocol/protocol.hpp"
#include "gossamer/optimizers/protocol/push_sum_math.hpp"
#include "gossamer/optimizers/protocol/share_chunks.hpp"
#include "gossamer/optimizers/protocol/share_outbox.hpp"
#include "gossamer/optimizers/protocol/small_containers.hpp"
#include "gossamer/optimizers/protocols/async/straggler.hpp"

namespace gossamer::proto {

/// Which variable the local optimizer steps (docs/algorithms/async.md).
enum class AsyncStep {
    debiased,   ///< z = x / w, then x = w z (as the SGP reference implementation does)
    numerator,  ///< x itself (as sgp): a step of lr / w in z's terms
};

struct AsyncOptions {
    int targets = 1;                  ///< out-neighbours pushed to per step, >= 1
    bool straggler_aware = true;      ///< false: self share base_self, uniform targets
    double beta = 1.0;                ///< exponent of the lag in the self share, > 0
    std::optional<double> base_self;  ///< in (0, 1); default 1 / (targets + 1)
    double target_power = 1.0;        ///< targets sampled with probability ~ rate^power, >= 0
    std::int64_t edge_bound = 0;      ///< B, steps; 0: 2 ceil(out-degree / targets)
    int rate_window = 16;             ///< steps or arrivals a rate is measured over, >= 2
    /// Steps between rate reports to in-neighbours, >= 1; at least ceil(in-degree / targets)
    /// (report_period()).
    int report_every = 4;
    bool balance = true;  ///< scale shares to slower targets by their outflow
    AsyncStep step = AsyncStep::debiased;
    bool follow_schedule = true;       ///< prefer the topology's round-t targets
    double deadline_percentile = 0.9;  ///< quantile of inter-arrival times, in (0, 1]
    double deadline_cap = 10.0;        ///< seconds, > 0
    std::uint64_t seed = 1;            ///< target sampling (mixed with the rank)
    /// One share in flight per out-edge; later shares to a busy edge add up in its outbox
    /// (share_outbox.hpp). On by default (issue 37: a default is the bounded choice); false
    /// queues every share in the transport, without bound when a link is slower than the
    /// steps. The driver must deliver send_completed for every share (both drivers do).
    bool outbox = true;
    /// A neighbour not heard from (no share, no report) for longer than max(silence,
    /// silence_factor x the longest gap between its recent messages) gets no shares until it is
    /// heard again: a stopped or cut-off peer would otherwise swallow mass push after push
    /// (docs/algorithms/async.md, "Silent neighbours"). silence 0: off.
    double silence = 0.25;      ///< seconds, >= 0
    double silence_factor = 4;  ///< >= 1
    /// Chunked sends: each share leaves in chunks of at most this many bytes of values, the
    /// weight with the last (share_chunks.hpp); 0: whole shares.
    ChunkBytes chunk_bytes;
    /// "links": "aware": targets are also weighted by their measured edge speed (link_aware.hpp);
    /// implies the outbox. Off by default (published figures are without it).
    bool link_aware = false;
    double link_power = 1.0;  ///< exponent of the link factor, [0, 16]

    double self_base() const { return base_self.value_or(1.0 / (targets + 1.0)); }
};

/// Reads the options object (nullptr: defaults). Throws ConfigError naming the JSON path of an
/// unknown key, a wrong type or a value out of range.
AsyncOptions parse_async_options(const json::Node* options);

/// What one peer knows about one base neighbour (either direction), for drivers to write out.
struct AsyncEdge {
    int peer = 0;
    bool out = false, in = false;  ///< base edge this -> peer / peer -> this
    bool failed = false;           ///< peer_failed was reported
    bool finished = false;         ///< the neighbour took its last step (it said so)
    /// Elastic jobs (docs/operations/elastic.md): not a live member (not joined yet, or gone).
    bool absent = false;
    bool leaving = false;  ///< it announced a graceful leave; its last shares may still come
    /// With `finished`: the shares it pushed to this peer in all (-1: not known yet).
    std::int64_t final_shares = -1;
    double rate = 0;           ///< measured steps per second (0: unknown)
    double reported_self = 0;  ///< the neighbour's self share from its latest report (0: none)
    std::int64_t reports = 0;  ///< rate reports received from it
    // This peer's pushes to the neighbour.
    std::int64_t pushes = 0;
    std::int64_t last_push = -1;  ///< this peer's step of the latest push
    double last_fraction = 0;     ///< share of this peer's mass in the latest push
    double weight_sent = 0;       ///< total w pushed
    // The neighbour's shares to this peer.
    std::int64_t shares = 0;  ///< received (absorbed or in the buffer)
    double weight_received = 0;
    std::int64_t absorbed = 0;
    std::int64_t staleness_max =
        0;  ///< in this peer's steps, see docs/algorithms/protocol-contract.md
    double staleness_mean = 0;
    double deadline = 0;    ///< seconds after an arrival the next is due (0: none yet)
    std::int64_t late = 0;  ///< deadlines it missed
    bool late_now = false;  ///< its deadline passed and no share has come since
};

class AsyncGossip final : public Protocol {
  public:
    /// Throws Error for a missing topology or one of another size. Only the graph is used (the
    /// union over the schedule's period, or its first 64 rounds when it has none); the
    /// topology's weights are ignored, the sender chooses its own.
    AsyncGossip(PeerContext ctx, AsyncOptions options);

    std::string_view name() const override { return "async"; }
    /// z = x / w, computed at the step boundary into a buffer the protocol owns.
    std::span<const float> compute_point() override { return math_.z(); }
    void current_model(std::span<float> out) const override;
    /// w (the receive buffer not included).
    double mass() const override { return w_; }

    const AsyncOptions& options() const noexcept { return options_; }
    std::int64_t steps() const noexcept { return t_; }
    double buffered_mass() const noexcept { return buf_w_; }
    std::span<const float> buffered_x() const noexcept { return math_.buffered(); }
    /// Shares in the receive buffer.
    std::size_t buffered_shares() const noexcept { return pending_.size(); }
    /// The self share s of the latest push (the base share before the first).
    double self_share() const noexcept { return self_share_; }
    /// The share of its mass this peer kept per step, averaged over about rate_window steps
    /// (a step that pushed nothing kept all of it).
    double effective_self_share() const noexcept { return effective_self_; }
    /// Measured own and mean neighbour rates (steps per second; 0: unknown).
    double own_rate() const;
    double neighbour_rate() const;
    /// The edge bound B in force (from the option and the base out-degree).
    std::int64_t edge_bound() const;
    /// Mass leaving this peer per second per unit of mass: r (1 - s) (0: rate unknown).
    double outflow() const;
    /// The fraction of this peer's mass a push to `peer` carries (the base fraction, scaled
    /// by min(1, outflow(peer) / outflow()) when balancing; docs/algorithms/async.md).
    double push_fraction(int peer) const;
    /// Steps between rate reports: max(report_every, ceil(base in-degree / targets)).
    std::int64_t report_period() const;
    /// Neighbours whose deadline passed without a share since.
    int late_neighbours() const;
    /// Every base neighbour, ascending by rank.
    std::vector<AsyncEdge> edges() const;
    /// edges() as JSON, one object per neighbour (written by the simulator into peers.jsonl).
    json::Json edge_metrics() const override;
    /// By value: the protocol keeps its neighbours in a narrower form.
    AsyncEdge edge(int peer) const;
    /// Done, and every in-neighbour that has not failed finished and its last share arrived:
    /// the mass this peer holds is final (sum of w over the peers = n with no failure).
    bool settled() const override;
    std::vector<int> settling_on() const override;
    /// The outbox (empty without the option).
    const ShareOutbox& outbox() const noexcept { return outbox_; }
    /// Shares of which some chunks, not all, have come (chunk_bytes).
    std::size_t partial_shares() const noexcept { return assembler_.partial(); }
    bool one_in_flight_per_edge() const override { return options_.outbox; }
    bool acts_on_edge_speeds() const override { return options_.link_aware; }
    std::size_t unsent() const override { return outbox_.pending(); }
    /// Resumes with its mass exact (async_state.cpp: it quiesces at each checkpoint step).
    std::string resume_refusal() const override {
        return options_.chunk_bytes.bytes > 0 || options_.chunk_bytes.automatic
                   ? "algorithm async with chunk_bytes cannot checkpoint and resume yet (its cut "
                     "is not taken between a share's chunks); drop chunk_bytes"
                   : "";
    }
    /// True while the peer waits at a checkpoint step for the shares sent before it.
    bool quiescing() const noexcept { return quiescing_; }
    /// Elastic jobs (async_elastic.cpp): async can join, leave and rejoin.
    std::string elastic_refusal() const override { return ""; }
    /// w, the receive buffer, the outbox and shares held for a cut.
    double held_mass() const override;
    /// True from a graceful leave until this peer has handed everything on.
    bool leaving() const noexcept { return leaving_; }

  protected:
    void on_start(Time now, Actions& out) override;
    void on_step_finished(Time now, double loss, Actions& out) override;
    void on_message(Time now, Message msg, Actions& out) override;
    void on_deadline(Time now, std::uint64_t id, Actions& out) override;
    void on_peer_failed(Time now, int rank, Actions& out) override;
    void on_send_completed(Time now, std::uint64_t id, bool ok, Actions& out) override;
    void save_state(StateWriter& w) const override;
    void restore_state(StateReader& r) override;
    void on_peer_absent(int rank) override;
    void on_join(Time now, Entry entry, Actions& out) override;
    void on_leave(Time now, Actions& out) override;

  private:
    /// An edge's part in checkpoint cuts (async_state.cpp, docs/operations/elastic.md).
    enum class CutEdge : std::uint8_t {
        steady,    ///< both ends cut together at every checkpoint step >= cut_from
        entering,  ///< the neighbour entered and is not admitted yet: it takes no part
        asked,     ///< this peer was admitted and asked the neighbour for its first cut
        deferred,  ///< the neighbour asked (cut_from: its proposal) while this peer was joining
    };
    /// One neighbour, either direction (docs/modules/simulator.md, "Scale": a simulated job
    /// holds n peers times their neighbours of these). The public view is AsyncEdge (edge()):
    /// counters are 32-bit (a job takes at most INT32_MAX steps, checked at construction), the
    /// flags are bits, staleness_mean is computed from staleness_sum, and the windows allocate
    /// as they fill (GrowingWindow).
    struct Neighbour {
        int peer = 0;
        bool out : 1 = false, in : 1 = false;  // base edge this -> peer / peer -> this
        bool failed : 1 = false, finished : 1 = false, absent : 1 = false, leaving : 1 = false;
        bool late_now : 1 = false;  // its deadline passed and no share has come since
        bool armed : 1 = false;     // a deadline is pending
        // Elastic jobs: whether its answer to this peer's leave is due.
        bool ack_due : 1 = false;
        // Checkpoint cuts in an elastic job (async_state.cpp): whether this edge takes part in
        // the cut at step S (steady and S >= cut_from), or is still being agreed.
        CutEdge cut = CutEdge::steady;
        // This peer's pushes to the neighbour (pushes, the step of the latest) and the
        // neighbour's shares here (received, absorbed), as AsyncEdge.
        std::int32_t pushes = 0, last_push = -1, shares = 0, absorbed = 0;
        std::int32_t reports = 0, late = 0, staleness_max = 0;
        std::int32_t final_shares = -1;  // with `finished` (-1: not known yet)
        double rate = 0, reported_self = 0, last_fraction = 0, weight_sent = 0;
        double weight_received = 0, deadline = 0;
        double last_share = 0;  // w of its latest share
        std::int64_t staleness_sum = 0;
        // Elastic jobs: when its latest incarnation entered (its own clock; shares sent before
        // are absorbed but not counted).
        Time entered_at = -1;
        std::int64_t cut_from = 0;
        // (time, sender step), rate_window + 1; the inter-arrival times (the deadline's window)
        // are the differences of consecutive entries.
        GrowingWindow<std::pair<Time, std::int64_t>> arrivals;
        GrowingWindow<Time> heard;  // when its recent messages (shares and reports) arrived
    };
    /// The public view of nb.
    static AsyncEdge view(const Neighbour& nb);
    /// peer's entry; throws Error when it is none.
    const Neighbour& known(int peer) const;

    /// j's state, created (with its windows sized) on first use.
    Neighbour& neighbour(int j);
    void apply_step();
    void push_shares(Actions& out);
    /// Sends share m now, or (outbox, edge busy) adds it to the edge's pending share.
    void post(Actions& out, Message m);
    /// Adds a share's mass to (x, w), or to the receive buffer while a step runs.
    void take_mass(int from, const Message& m);
    void absorb(int from, Time sent_at);
    void send_reports(Time now, Actions& out);
    void on_report(const Message& msg, Neighbour& nb);
    void absorb_buffer();
    void arm_deadline(Time now, Neighbour& nb, Actions& out);
    void finish(Actions& out);
    std::vector<int> live_out() const;
    /// The live out-neighbours into live_: at the start and whenever one fails or finishes
    /// (push_shares reads live_ on every step; a scan of every neighbour per step was 6% of a
    /// large simulation).
    /// push_shares' working vectors are one set per thread, not per peer: a simulated job holds
    /// many peers on one thread (async_gossip.cpp).
    void collect_live_out();
    /// The link factor of out-edge j this step (1 without link awareness; link_aware.hpp).
    double link_weight(int j, double r_self) const;
    /// Link-aware: drops the candidates whose edge has a share in flight, except those unused
    /// for `force_age` steps (the edge bound); returns min(k, candidates left).
    int keep_free_edges(std::vector<EdgeCandidate>& cands, int k, std::int64_t force_age) const;
    /// Adds a step's kept share to effective_self_share().
    void note_kept(double kept);
    /// The self share rate reports and outflow() use: the effective one when link-aware (steps
    /// that push nothing keep everything), else the latest push's.
    double advertised_self() const;
    /// push_fraction with k targets this step.
    double fraction_to(const Neighbour& e, int k) const;
    bool usable(const Neighbour& nb) const {
        return !nb.failed && !nb.finished && !nb.absent && !nb.leaving;
    }
    /// Heard from recently enough to be pushed to (AsyncOptions::silence).
    bool silent(const Neighbour& nb) const;
    /// Done or not, whether this peer still waits for nb's last shares (settled()).
    static bool awaits(const Neighbour& nb);

    AsyncOptions options_;
    Rng rng_;
    std::int64_t t_ = 0;
    double w_ = 1.0, buf_w_ = 0.0, self_share_, effective_self_;
    PushSumMath math_;                           // z and the receive buffer
    std::vector<std::pair<int, Time>> pending_;  // (sender, sent at) in the buffer
    // Own step boundaries (rate, staleness): the last kHistory (async_gossip.cpp), one more
    // for a moment after a join; a ring that allocates as it fills.
    GrowingWindow<Time> history_;
    bool heard_all_ = false;  // every neighbour's `heard` window is kept, not only out-edges'.
    Time now_ = 0;            // time of the event being handled
    FlatMap<int, Neighbour> nbrs_;
    std::vector<int> live_;                    // live out-neighbours, ascending
    const topology::Digraph* base_ = nullptr;  // the schedule's base graph (shared, immutable)
    ShareOutbox outbox_;
    ShareAssembler assembler_;

    // Quiescence at checkpoint steps (async_state.cpp).
    /// The next checkpoint step this peer cuts at (INT64_MAX: none).
    std::int64_t next_cut() const;
    /// Stops at checkpoint step t_: sends each out-neighbour the count of shares pushed to it.
    void begin_quiesce(Actions& out);
    /// Takes a message that belongs after the next cut (holds it) or is a cut's marker; false:
    /// on_message goes on with it.
    bool quiesce_intercept(const Message& msg);
    /// Once the outbox is empty and every live in-neighbour's shares before the cut are in:
    /// the snapshot, then the held messages, then the next step.
    void check_quiesced(Time now, Actions& out);
    /// Whether the edge to nb takes part in the cut at `step`.
    static bool cuts_with(const Neighbour& nb, std::int64_t step) {
        return nb.cut == CutEdge::steady && nb.cut_from <= step;
    }
    /// The first checkpoint step this peer has not begun to quiesce at.
    std::int64_t unbegun_cut() const;
    /// Admitted (a join or rejoin): agrees with each live neighbour on the edge's first cut.
    void agree_first_cuts(Actions& out);
    /// A neighbour's kAdmitted (its proposal) or kCutFrom (the agreed first cut).
    void on_cut_agreement(const Message& msg, Neighbour& nb, Actions& out);
    /// Answers a neighbour's proposal: the edge's first cut, which this peer has not begun.
    void answer_first_cut(Neighbour& nb, std::int64_t proposed, Actions& out);
    /// Sends nb the count of shares pushed to it before the cut at t_.
    void send_cut_mark(const Neighbour& nb, Actions& out);
    /// Takes the messages held for a cut again (after a cut, or once admitted).
    void release_held(Time now, Actions& out);
    // Elastic jobs (async_elastic.cpp).
    /// Membership control messages (async_control.hpp: kJoined and later); false: not one.
    bool on_membership(Time now, const Message& msg, Neighbour& nb, Actions& out);
    /// The sponsor's answer (a full_model message): this peer is a member from now on.
    void on_admitted(Time now, const Message& msg, Actions& out);
    /// j entered the job: its edges count from zero again.
    void reset_neighbour(Neighbour& nb, Time entered_at);
    /// Asks the lowest live neighbour to sponsor this joining peer (Error when none is left).
    void ask_sponsor(Actions& out);
    /// Splits (x, w) in half with every peer that asked and is waiting (between steps only).
    void serve_sponsored(Actions& out);
    /// Hands (x, w) to the live out-neighbours and tells every neighbour (between steps only).
    void hand_over(Actions& out);
    /// Who takes a leaving peer's state: out-neighbours not failed, absent or leaving; with
    /// none, such in-neighbours.
    std::vector<int> takers() const;
    /// A share that reached this leaving peer goes on to a live out-neighbour.
    void pass_on(const Message& msg, Actions& out);
    /// Leaving: once every live in-neighbour answered and its shares are all here, the last
    /// counts go out and the peer is done.
    void check_left(Actions& out);
    void send_control(Actions& out, int to, std::uint32_t code, std::uint64_t seq);
    bool leave_due_ = false, leaving_ = false, left_ = false;
    Entry entry_ = Entry::fresh;
    int sponsor_ = -1;
    std::vector<float> own_model_;            // rejoin: the model it comes back with (z)
    std::vector<std::pair<int, bool>> asks_;  // (peer, rejoin) waiting for this sponsor's split
    std::vector<Message> late_answers_;       // a second sponsor's answer that came in a step

    bool quiescing_ = false;
    std::map<int, std::int64_t> cut_marks_;  // sender -> shares it pushed here before the cut
    std::vector<Message> held_;              // messages of rounds at or after the next cut
};

/// The "async" protocol with its options (nullptr: defaults).
std::unique_ptr<Protocol> make_async(const json::Node* options, PeerContext ctx);

}  // namespace gossamer::proto
