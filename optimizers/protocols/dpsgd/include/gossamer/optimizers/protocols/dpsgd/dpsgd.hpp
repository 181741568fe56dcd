#pragma once
/// D-PSGD: synchronous gossip averaging with the row-stochastic W of the topology's round t
/// (Lian et al. 2017), on static or time-varying topologies. See docs/algorithms/dpsgd.md.
///
/// Round t of peer i is its step t:
///   atc (adapt-then-combine, default): x_half = x - lr g(x), then x <- sum_j W_ij x_half_j
///   cta (combine-then-adapt):          x <- sum_j W_ij x_j - lr g(x_i)
/// where "- lr g" is the worker's optimizer step (worker().apply_gradient). In cta mode the
/// messages of round t leave before step t starts (they are computed from x then), so
/// communication overlaps the gradient computation.
///
/// Delayed atc (delay 1): round t's messages leave while step t + 1 is computed and are mixed
/// at its end, before its gradient is applied: h_t = sum_j W_ij h_{t-1,j} - lr g(h_{t-1}),
/// h_{-1} = x_0, step t computing its gradient at h_{t-1} (unmixed); after the last step one
/// more mix, so the final model is sum_j W_ij h_{T-1,j} (docs/algorithms/protocol-contract.md).
///
/// Messages are deltas against per-edge replicas with edge sequence numbers (edge_replica.hpp).
/// A peer mixes round t once it holds round t's state of every live in-neighbour of round t;
/// messages of later rounds wait in their edge's queue. While it waits longer than
/// resync_timeout, it asks each in-neighbour still missing for a full model (a control message
/// carrying the sequence number it expects), and again every resync_timeout. The sender answers
/// with its replica of the edge only once that message left at least resync_timeout ago, so
/// asking a slow neighbour, or about a message still in flight, costs a header.
///
/// Failures: after peer_failed(j), W_ij moves to W_ii in every round not yet mixed and nothing
/// more is sent to j.
///
/// Elastic jobs (dpsgd_elastic.cpp, docs/operations/elastic.md): a joiner copies its sponsor's
/// model and enters at an agreed round; a leaver's weight moves to W_ii from the round after its
/// last; an absent peer's weight is W_ii's, as a dead one's.
///
/// Per-partition gossip (multirate.hpp): when the worker trains with multirate rates, each
/// partition p is its own channel with its own replicas, sequence numbers, optional compressor
/// and round counter r_p. Partition p is mixed only on the steps t with (t + 1) % g_p == 0 (g_p:
/// its gossip period), with the graph and W of topology round r_p, and then r_p advances; so a
/// partition with g_p = 4 still visits every graph of a periodic schedule in turn instead of
/// aliasing with it. Messages carry Message::partition = p and round = r_p. At the end of step t
/// a peer waits only for the partitions due at t (none due: it goes on at once). Without
/// multirate there is one channel over the whole model (partition 0) with r_0 = t.

#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "gossamer/core/json.hpp"
#include "gossamer/optimizers/protocol/edge_replica.hpp"
#include "gossamer/optimizers/protocol/protocol.hpp"
#include "gossamer/optimizers/protocol/recent_sends.hpp"
#include "gossamer/optimizers/protocol/share_chunks.hpp"
#include "gossamer/optimizers/protocol/small_containers.hpp"

namespace gossamer::proto {

enum class DpsgdMode { atc, cta };

struct DpsgdOptions {
    DpsgdMode mode = DpsgdMode::atc;
    /// 0, or 1: the one-step-delayed atc rule (atc only, no reweight).
    int delay = 0;
    /// Seconds a peer waits for a round's message before asking its sender for a full model
    /// (and between repeated asks). > 0. Keep it well above the link latency: a message still in
    /// flight when the ask arrives is answered with a full model that turns out redundant.
    double resync_timeout = 5.0;
    /// Receiver-side reweighting (off unless set; biased, for comparison:
    /// docs/algorithms/protocol-contract.md). A peer waits at most `wait` seconds for a round's
    /// messages, then mixes with what it holds: a neighbour whose replica is s rounds behind gets
    /// W_ij * decay^s, the rest goes to the peer's own weight (rows still sum to 1; columns no
    /// longer do, so the average drifts towards the fast peers). Newer states than the round's are
    /// used as they come.
    struct Reweight {
        double wait = 0.1;   ///< seconds, > 0
        double decay = 0.5;  ///< in (0, 1]
    };
    std::optional<Reweight> reweight;
    /// Chunked sends: 0 (one message per partition and neighbour), or the most bytes of values
    /// one message carries (>= 4); each chunk is its own message, absorbed into the edge's
    /// replica as it arrives (docs/algorithms/protocol-contract.md, "Chunked sends").
    /// Or "auto": one size for the job from the cluster file's links (share_chunks.hpp).
    ChunkBytes chunk_bytes;
    /// Act on partition_ready events (docs/algorithms/protocol-contract.md, "Partition-ready"), in
    /// every mode but reweight: a channel whose partitions are all ready is mixed (cta, delayed),
    /// stepped and sent before the step ends; the same values as without, earlier.
    bool partition_ready = false;
};

/// Reads {"mode": "atc" | "cta", "delay": 0 | 1, "resync_timeout": seconds, "reweight": {...}};
/// nullptr gives the defaults.
/// Throws ConfigError naming the JSON path for an unknown key, a wrong type or a bad value.
DpsgdOptions parse_dpsgd_options(const json::Node* options);

class Dpsgd final : public Protocol {
  public:
    /// Throws Error for a missing topology or one of another size, and TopologyError when the
    /// topology's weights are of push_sum kind (dpsgd needs rows summing to 1).
    Dpsgd(PeerContext ctx, DpsgdOptions options);

    std::string_view name() const override { return "dpsgd"; }
    /// x itself (the compute side reads it; the protocol leaves it alone until step_finished).
    std::span<const float> compute_point() override;
    void current_model(std::span<float> out) const override;

    const DpsgdOptions& options() const noexcept { return options_; }
    /// The round being worked on (steps mixed so far).
    std::int64_t round() const noexcept { return t_; }
    /// Gossip channels: 1 (whole model) or one per multirate partition, times the chunks each
    /// is cut into (chunk_bytes).
    std::size_t channels() const noexcept { return channels_.size(); }
    /// Rounds channel (partition) c has mixed: its topology round counter r_c.
    std::int64_t partition_round(std::size_t c) const { return channels_.at(c).round; }
    /// The edge to receiver j of channel c, or nullptr if it never carried anything.
    const ReplicaSender* out_edge(int j, std::size_t c = 0) const;
    /// The edge from sender j of channel c, or nullptr if nothing came from j.
    const ReplicaReceiver* in_edge(int j, std::size_t c = 0) const;
    /// Re-sync requests sent, and full models sent in answer to others' requests.
    std::uint64_t resync_requests() const noexcept { return resync_requests_; }
    std::uint64_t resync_answers() const noexcept { return resync_answers_; }
    /// The weights of the last mix: self weight, then (sender, weight) of every live in-neighbour.
    double last_self_weight() const noexcept { return last_self_weight_; }
    const std::vector<std::pair<int, double>>& last_weights() const noexcept {
        return last_weights_;
    }
    /// Rounds mixed with at least one stale neighbour (reweight only).
    std::int64_t stale_mixes() const noexcept { return stale_mixes_; }
    /// Per in-neighbour: the weight and staleness (rounds) of the last mix, the mean staleness
    /// over its mixes, mixes it was stale in (reweight only: else it always waits, staleness 0).
    json::Json edge_metrics() const override;
    /// With the partition_ready option, on a host worker with partitions and no multirate.
    bool takes_partition_ready() const override;
    /// Channels sent before their step ended (partition_ready), in all.
    std::uint64_t early_sends() const noexcept { return early_sends_; }
    /// Resumes bit for bit except with delay 1 or reweight (dpsgd_state.cpp).
    std::string resume_refusal() const override;
    /// "" unless delay 1, reweight, partition_ready or multirate is in use (dpsgd_elastic.cpp).
    std::string elastic_refusal() const override;

  protected:
    void on_start(Time now, Actions& out) override;
    void on_step_finished(Time now, double loss, Actions& out) override;
    void on_message(Time now, Message msg, Actions& out) override;
    std::optional<NonFinite> first_non_finite_value(const Message& msg,
                                                    std::span<const float> values) const override;
    bool compressed(const Message& msg) const override;
    void on_deadline(Time now, std::uint64_t id, Actions& out) override;
    void on_send_completed(Time now, std::uint64_t id, bool ok, Actions& out) override;
    void on_peer_failed(Time now, int rank, Actions& out) override;
    void on_partition_ready(Time now, std::uint32_t id, Actions& out) override;
    void save_state(StateWriter& w) const override;
    void restore_state(StateReader& r) override;
    void on_peer_absent(int rank) override;
    void on_join(Time now, Entry entry, Actions& out) override;
    void on_leave(Time now, Actions& out) override;

  private:
    enum class Stage { idle, stepping, waiting, done };

    // One partition's gossip state (the whole model when there is no multirate).
    struct Channel : PartitionChannel {
        std::uint32_t slot = 0;  // its index in channels_ (the codec stream's id)
        std::int64_t round = 0;  // r_p: topology rounds this channel has mixed
        std::map<int, ReplicaSender> out;
        std::map<int, ReplicaReceiver> in;
        // The recent sends to each out-neighbour, to judge re-sync requests.
        FlatMap<int, RecentSends> sent_at;
    };

    void begin_round(Time now, Actions& out);
    /// Whether a snapshot at round t_ is one of a consistent cut: true but after a join, where
    /// every edge's stream must have restarted at or before t_ (dpsgd_elastic.cpp).
    bool entered_cut() const;
    void send_round(Time now, Actions& out);
    void try_mix(Time now, Actions& out);
    /// Delayed rule: the previous round is mixed (or there was none): apply the step's
    /// gradient, send its round, start the next step (or wait for the last round).
    void after_delayed_mix(Time now, Actions& out);
    bool due(const Channel& c) const;
    std::uint64_t stream(const Channel& c, int sender, int receiver) const;
    ReplicaReceiver& receiver(Channel& c, int j);
    /// The channel of (partition, chunk) on the wire, or nullptr.
    Channel* channel_of(const Message& msg);
    /// x[c] <- self x[c] + sum_j w_j replica_j[c] (host or device), the weights recorded.
    void mix_channel(Channel& c, std::span<float> x, double self,
                     std::vector<std::pair<int, double>> weights);
    /// Sends channel c's round to its out-neighbours of that round (send_round's inner loop).
    void send_channel(Time now, Channel& c, std::span<const float> x, Actions& out);
    // partition_ready (dpsgd_ready.cpp): mix, step and send what the ready partitions allow.
    void advance_ready(Time now, Actions& out);
    bool mix_ready(Channel& c);
    void reset_ready();
    /// Throws ConfigError when partition_ready is set with multirate rates or a device worker.
    void check_ready_option() const;
    bool mixed_early(const Channel& c) const {
        return c.slot < early_mixed_.size() && early_mixed_[c.slot];
    }
    bool sent_early(const Channel& c) const {
        return c.slot < early_sent_.size() && early_sent_[c.slot];
    }

    DpsgdOptions options_;
    Stage stage_ = Stage::idle;
    std::int64_t t_ = 0;
    std::int64_t sent_ = 0;      // rounds sent
    bool grad_pending_ = false;  // delayed: a finished step's gradient is not applied yet
    std::vector<Channel> channels_;
    ChannelIndex index_;  // (partition, chunk) -> slot in channels_
    std::set<int> dead_;
    std::uint64_t next_deadline_ = 1, armed_deadline_ = 0;
    SendsInFlight in_flight_;           // data sends not completed yet, by send id
    std::uint64_t stale_deadline_ = 0;  // reweight: the wait of round stale_round_ is over
    std::int64_t stale_round_ = -1;
    std::int64_t stale_mixes_ = 0;
    struct InStats {
        double weight = 0;
        std::int64_t staleness = 0, stale = 0, mixes = 0, staleness_sum = 0;
    };
    std::map<int, InStats> in_stats_;
    std::uint64_t resync_requests_ = 0, resync_answers_ = 0;
    double last_self_weight_ = 1.0;
    std::vector<std::pair<int, double>> last_weights_;
    // partition_ready, per channel slot / partition id, for the running step.
    std::vector<char> early_mixed_, early_sent_, stepped_;
    std::vector<std::pair<std::size_t, std::size_t>> channel_parts_;  // [first, last] partition
    std::uint64_t early_sends_ = 0;

    // Elastic jobs (dpsgd_elastic.cpp).
    /// Membership messages (Message::chunk from kMembership on); false: not one.
    bool on_membership(Time now, const Message& msg, Actions& out);
    /// Whether j's state takes part in this peer's round `round` (j not absent for it).
    bool mixes_with(int j, std::int64_t round) const;
    /// Whether this peer's round `round` goes to j.
    bool sends_to(int j, std::int64_t round) const;
    void ask_sponsor(Time now, Actions& out);
    /// j declared that its stream to this peer restarts at round `start` (kJoined, kJoinAck).
    void declared(int j, std::int64_t start);
    /// Restarts this peer's stream to joiner j at max(first, next round to send) and says so.
    void answer_joined(Time now, int j, std::int64_t first, Actions& out);
    /// Answers the joiners that asked, with x and the round this peer works on (not stepping).
    void serve_sponsored(Time now, Actions& out);
    void leave_now(Time now, Actions& out);
    /// Every message carries its send time (Message::sent_at): receivers drop what a rejoined
    /// peer's previous incarnation sent.
    void send_member(Actions& out, Time now, int to, std::uint32_t code, std::int64_t round);
    struct Rounds {
        std::int64_t from = 0, until = std::numeric_limits<std::int64_t>::max();
    };
    std::map<int, Rounds> mix_rounds_, send_rounds_;  // per neighbour that joined or leaves
    std::map<int, Time> entered_at_;  // its latest incarnation's start: older messages drop
    std::map<int, std::int64_t> stream_start_;  // its declared stream start: older rounds drop
    std::set<int> acks_due_;  // joining: in-neighbours whose first round is not known
    // Checkpoints after a join: a snapshot only once every neighbour told answered and from the
    // latest first round of its edges on (dpsgd_elastic.cpp, entered_cut()).
    std::set<int> cut_acks_due_;
    std::int64_t cut_floor_ = 0;
    std::vector<std::pair<int, bool>> asks_;  // (joiner, rejoin) waiting for this sponsor
    std::vector<Message> held_joins_;         // kJoined that came while this peer joins
    bool leave_due_ = false, left_ = false;
    Entry entry_ = Entry::fresh;
    int sponsor_ = -1;
};

/// The "dpsgd" protocol with its options (nullptr: defaults). Throws as parse_dpsgd_options and
/// the constructor.
std::unique_ptr<Protocol> make_dpsgd(const json::Node* options, PeerContext ctx);

}  // namespace gossamer::proto
