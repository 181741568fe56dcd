#pragma once
/// SGP: stochastic gradient push (Assran et al. 2019), push-sum gossip on directed and
/// time-varying graphs with column-stochastic weights. See docs/algorithms/sgp.md.
///
/// Each peer carries (x, w), w starting at 1, and computes its gradient at z = x / w. Step t:
///   g = grad(z); x <- x - lr g (the worker's optimizer applied to x, not z, as in the paper);
///   keep (W_ii x, W_ii w), send (W_ji x, W_ji w) to every out-neighbour j of round t
///   (mass_share, Message::weight = the w share); shares received are added to (x, w).
/// Shares are never dropped or overwritten: sum_i w_i plus the weight in flight is always n.
///
/// Bounded staleness tau: a peer has "absorbed round r" when it has added the shares of round r
/// from every live in-neighbour of round r (the senders of topology round r), and its frontier c
/// is the latest round, among those it has sent itself, such that it has absorbed every round up
/// to c. Before step s it has sent rounds 0..s-1, so it is (s - 1 - c) rounds ahead; it starts
/// step s only while that is at most tau. tau = 0 is synchronous SGP; tau = 1 (the default)
/// overlaps one round of communication with computation. After its last step a peer waits until
/// c reaches its last round, then reports done, so no mass is left in flight at the end.
///
/// Shares that arrive during a step are summed in a receive buffer and added at the step
/// boundary (the compute side owns x then); otherwise they are added at once.
///
/// Failures: after peer_failed(j) no share goes to j (its weight W_ji is kept as self weight, so
/// mass stays conserved among the survivors) and j's shares are no longer waited for. The mass j
/// held is lost; stats().mass_lost adds this peer's estimate of it: j's weight before its latest
/// split seen here (the share received divided by W_ij of that round). Every peer that heard
/// from j reports its own estimate of the same mass: take the maximum over peers, not the sum.

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "gossamer/core/json.hpp"
#include "gossamer/optimizers/protocol/protocol.hpp"
#include "gossamer/optimizers/protocol/push_sum_math.hpp"
#include "gossamer/optimizers/protocol/share_chunks.hpp"
#include "gossamer/optimizers/protocol/share_outbox.hpp"
#include "gossamer/optimizers/protocol/small_containers.hpp"

namespace gossamer::proto {

struct SgpOptions {
    /// tau: rounds a peer may run ahead of the shares it has absorbed, >= 0.
    std::int64_t staleness = 1;
    /// One share in flight per out-edge; later shares to a busy edge add up in its outbox and
    /// leave as one message when the edge is free (share_outbox.hpp).
    bool outbox = false;
    /// Chunked sends: each share leaves in chunks of at most this many bytes of values, the
    /// weight with the last (share_chunks.hpp); 0: whole shares.
    ChunkBytes chunk_bytes;
};

/// Reads {"staleness": tau (an integer in [0, 1000]), "outbox": bool, "chunk_bytes": bytes
/// (>= 4) or "auto"}; nullptr gives the defaults.
/// Throws ConfigError naming the JSON path for an unknown key, a wrong type or a bad value.
SgpOptions parse_sgp_options(const json::Node* options);

class Sgp final : public Protocol {
  public:
    /// Throws Error for a missing topology or one of another size, and TopologyError when its
    /// weights are not column-stochastic (push_sum kind, or averaging weights whose columns also
    /// sum to 1 in every round of the period; rounds of a schedule with no period are checked as
    /// they are used).
    Sgp(PeerContext ctx, SgpOptions options);

    std::string_view name() const override { return "sgp"; }
    /// z = x / w, computed at the step boundary into a buffer the protocol owns.
    std::span<const float> compute_point() override { return math_.z(); }
    /// z = x / w.
    void current_model(std::span<float> out) const override;
    /// w (the receive buffer not included).
    double mass() const override { return w_; }
    /// w, the receive buffer, the outbox and shares held for a cut.
    double held_mass() const override;

    const SgpOptions& options() const noexcept { return options_; }
    /// Steps finished, i.e. rounds whose shares have been sent.
    std::int64_t round() const noexcept { return t_; }
    /// The frontier c (-1: nothing absorbed yet).
    std::int64_t absorbed_through() const noexcept { return frontier_; }
    /// True while the peer waits for shares before it may start its next step.
    bool blocked() const noexcept { return stage_ == Stage::blocked; }
    /// The receive buffer: shares that arrived during the running step.
    double buffered_mass() const noexcept { return buf_w_; }
    std::span<const float> buffered_x() const noexcept { return math_.buffered(); }
    /// The outbox (empty without the option).
    const ShareOutbox& outbox() const noexcept { return outbox_; }
    /// Shares of which some chunks, not all, have come (chunk_bytes).
    std::size_t partial_shares() const noexcept { return assembler_.partial(); }
    bool one_in_flight_per_edge() const override { return options_.outbox; }
    /// Per in-neighbour: `weight`, W_ij of its latest share's round (the part of its mass it
    /// sends this peer); `staleness_mean` and `staleness_max`, the mean and largest rounds this
    /// peer was past a share's round when it arrived (max(0, round() - 1 - its round)); `shares`.
    json::Json edge_metrics() const override;
    std::size_t unsent() const override { return outbox_.pending(); }
    /// Resumes with its mass exact (sgp_state.cpp: it quiesces at each checkpoint step).
    std::string resume_refusal() const override {
        return options_.chunk_bytes.bytes > 0 || options_.chunk_bytes.automatic
                   ? "algorithm sgp with chunk_bytes cannot checkpoint and resume yet (its cut "
                     "is not taken between a share's chunks); drop chunk_bytes"
                   : "";
    }

  protected:
    void on_start(Time now, Actions& out) override;
    void on_step_finished(Time now, double loss, Actions& out) override;
    void on_message(Time now, Message msg, Actions& out) override;
    void on_peer_failed(Time now, int rank, Actions& out) override;
    void on_send_completed(Time now, std::uint64_t id, bool ok, Actions& out) override;
    void save_state(StateWriter& w) const override;
    void restore_state(StateReader& r) override;

  private:
    enum class Stage { idle, stepping, blocked, done };
    struct Seen {
        std::int64_t round = -1;
        double mass = 0;  // the sender's w before that round's split
    };

    void push_shares(Actions& out);
    /// Sends share m now, or (outbox, edge busy) adds it to the edge's pending share.
    void post(Actions& out, Message m);
    /// Adds a share to (x, w), or to the receive buffer while a step runs.
    void take_share(const Message& m);
    /// Marks what share m from j completes for the frontier: its round, or with the outbox every
    /// round of j -> this peer since j's previous share (merged shares).
    void heard(int j, const Message& m);
    void absorb_buffer();
    void advance_frontier();
    bool absorbed(std::int64_t r) const;
    void next(Actions& out);

    SgpOptions options_;
    Stage stage_ = Stage::idle;
    std::int64_t t_ = 0;
    std::int64_t frontier_ = -1;
    double w_ = 1.0, buf_w_ = 0.0;
    std::uint64_t buffered_ = 0;  // shares in the receive buffer
    PushSumMath math_;            // z and the receive buffer
    bool dead(int j) const { return std::binary_search(dead_.begin(), dead_.end(), j); }

    // Flat, sorted vectors (docs/modules/simulator.md, "Scale"): a simulated job holds n of these,
    // and node-based maps cost an allocation per share.
    std::vector<std::pair<std::int64_t, int>> heard_;  // (round, sender) absorbed, past frontier_
    FlatMap<int, std::uint64_t> next_seq_;             // per out-edge
    FlatMap<int, Seen> seen_;                          // latest share from each sender
    struct InEdge {
        double weight = 0;
        std::int64_t shares = 0, staleness_sum = 0, staleness_max = 0;
    };
    FlatMap<int, InEdge> in_edges_;          // edge_metrics()
    FlatMap<int, std::int64_t> last_round_;  // outbox: round of j's latest share
    ShareOutbox outbox_;
    ShareAssembler assembler_;
    std::vector<int> dead_;  // sorted

    // Quiescence at checkpoint steps (sgp_state.cpp).
    /// The checkpoint step this peer cuts at next (INT64_MAX: none).
    std::int64_t next_cut() const;
    /// Holds a share of a round at or after the next cut until the cut; true when held.
    bool hold_for_cut(Message& msg);
    /// At a checkpoint step t_: false while shares before it are missing or the outbox holds
    /// some; else the snapshot, then the held shares are taken, and true.
    bool try_cut();
    /// A share's mass and bookkeeping (what on_message does with one it does not hold).
    void accept_share(const Message& msg);
    std::int64_t cut_at_ = 0;    // the latest step cut at
    std::vector<Message> held_;  // shares of rounds at or after the next cut
};

/// The "sgp" protocol with its options (nullptr: defaults). Throws as parse_sgp_options and the
/// constructor.
std::unique_ptr<Protocol> make_sgp(const json::Node* options, PeerContext ctx);

}  // namespace gossamer::proto
