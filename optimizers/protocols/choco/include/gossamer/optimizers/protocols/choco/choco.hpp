#pragma once
/// CHOCO-SGD (Koloskova, Stich and Jaggi 2019): gossip with compressed messages and error
/// feedback through public replicas. See docs/algorithms/choco.md, and
/// docs/algorithms/compression.md.
///
/// Peer i keeps x_i and x_hat_i, the public copy of x_i that its neighbours hold, and a replica
/// x_hat_j of every in-neighbour j. Round t of peer i is its step t:
///   x_i <- x_i - lr g                  (worker().apply_gradient)
///   q_i = Q(x_i - x_hat_i); send q_i to the out-neighbours of round t; x_hat_i += q_i
///   on q_j from in-neighbour j:        x_hat_j += q_j
///   x_i <- x_i + gamma * sum_j W_ij (x_hat_j - x_hat_i)      (once every q_j of round t is in)
/// x - x_hat is itself the error feedback: what Q dropped is sent again in later rounds.
/// Delayed (delay 1): round t's q_i leave while step t + 1 is computed (at x_i after its local
/// step, unmixed); at the end of step t + 1 round t is mixed, then step t + 1's gradient applied
/// and round t + 1 sent. After the last step one more mix (docs/algorithms/protocol-contract.md).
///
/// Replicas: on a static topology (period 1) a peer keeps ONE x_hat_i shared by all its
/// out-edges and compresses once per round. On a time-varying topology each out-edge (i, j)
/// keeps its own x_hat_ij, created when the edge is first used, because j only sees the rounds
/// in which the edge exists; every round must then be symmetric (j sends to i exactly when i
/// sends to j), otherwise TopologyError, and the mix uses x_hat_ji - x_hat_ij for each neighbour.
/// The first message on an edge (or of the shared replica) is a full model (x_hat := x), later
/// ones are model_delta messages carrying encoded Q(x - x_hat); both ends add the same decoded
/// floats, so replicas stay bit-identical. Messages carry edge sequence numbers and are applied
/// in sequence order (a reordered message waits for the missing one). A peer that waits longer
/// than resync_timeout for a round's message asks its sender (a control message with the number
/// it expects) for a full copy of the sender's replica, as dpsgd does; the copy supersedes every
/// message numbered up to it.
///
/// Failures: after peer_failed(j) nothing more is sent to j and its term leaves the mix.
///
/// Per-partition gossip (multirate.hpp), as in dpsgd: when the worker trains with multirate
/// rates, each partition p is its own channel (replicas, sequence numbers, round counter r_p,
/// compressor: the partition's, else the "compressor" option). Partition p is mixed only on the
/// steps t with (t + 1) % g_p == 0, with topology round r_p; messages carry Message::partition.

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "gossamer/core/json.hpp"
#include "gossamer/optimizers/compress/compressor.hpp"
#include "gossamer/optimizers/protocol/edge_codec.hpp"
#include "gossamer/optimizers/protocol/device.hpp"
#include "gossamer/optimizers/protocol/protocol.hpp"
#include "gossamer/optimizers/protocol/recent_sends.hpp"
#include "gossamer/optimizers/protocol/share_chunks.hpp"

namespace gossamer::proto {

/// Where x_hat lives (docs/algorithms/choco.md): automatic = shared on a static topology,
/// per edge on a time-varying one; shared on a periodic time-varying topology sends every round's
/// Q(x - x_hat) to every out-neighbour of the period's union graph (more bytes, fresher replicas).
enum class ChocoReplicas { automatic, shared, per_edge };

struct ChocoOptions {
    double gamma = 0.5;                  ///< consensus step, in (0, 1]
    optim::CompressorConfig compressor;  ///< fp16 by default
    /// Seconds a peer waits for a round's message before asking for a full replica (and between
    /// asks), > 0. Keep it well above the link latency.
    double resync_timeout = 5.0;
    ChocoReplicas replicas = ChocoReplicas::automatic;
    /// 0, or 1: the one-step-delayed rule (round t is mixed at the end of step t + 1).
    int delay = 0;
    /// Chunked sends: 0, or the most bytes of values one message carries (>= 4; each chunk
    /// its own channel, absorbed as it arrives: docs/algorithms/protocol-contract.md, "Chunked
    /// sends"). Or "auto": one size for the job from the cluster file's links (share_chunks.hpp).
    ChunkBytes chunk_bytes;
    /// Act on partition_ready events (docs/algorithms/protocol-contract.md, "Partition-ready"): a
    /// channel whose partitions are all ready is mixed (delayed: round t - 1), stepped and sent
    /// before the step ends; the same values as without, earlier.
    bool partition_ready = false;
    /// Per-edge compression (edge_codec.hpp): each delta's compressor chosen from its edge's
    /// measured throughput; needs per-edge replicas ("auto" then means per_edge).
    std::vector<EdgeCodecTier> edge_compression;
};

/// Reads {"gamma": 0.5, "compressor": {...}, "resync_timeout": 5.0} (compressor.hpp); nullptr
/// gives the defaults.
/// Throws ConfigError naming the JSON path for an unknown key, a wrong type or a bad value.
ChocoOptions parse_choco_options(const json::Node* options);

class Choco final : public Protocol {
  public:
    /// Throws Error for a missing topology or one of another size, TopologyError for push-sum
    /// weights or (time-varying topologies) a round that is not symmetric.
    Choco(PeerContext ctx, ChocoOptions options);

    std::string_view name() const override { return "choco"; }
    /// x itself.
    std::span<const float> compute_point() override;
    void current_model(std::span<float> out) const override;

    const ChocoOptions& options() const noexcept { return options_; }
    const optim::Compressor& compressor() const noexcept { return *compressor_; }
    /// Rounds (steps) mixed so far.
    std::int64_t round() const noexcept { return t_; }
    /// Gossip channels: 1 (whole model) or one per multirate partition.
    std::size_t channels() const noexcept { return channels_.size(); }
    /// Rounds channel (partition) c has mixed: its topology round counter r_c.
    std::int64_t partition_round(std::size_t c) const { return channels_.at(c).round; }
    /// True on a static topology: one x_hat_i for all out-edges.
    bool shared_replica() const noexcept { return shared_; }
    /// x_hat of channel c as receiver j holds it once our messages are in (empty: nothing sent).
    std::span<const float> public_replica(int j, std::size_t c = 0) const;
    /// Our replica of in-neighbour j's x_hat of channel c (empty: nothing received from j).
    std::span<const float> neighbour_replica(int j, std::size_t c = 0) const;
    /// Messages of channel c sent on edge (this peer, j) and applied from edge (j, this peer).
    std::uint64_t sent_on(int j, std::size_t c = 0) const;
    std::uint64_t applied_from(int j, std::size_t c = 0) const;
    /// Deltas sent on edge (this peer, j) with each codec (edge_codec.hpp), by codec id.
    std::vector<std::uint64_t> codecs_sent(int j) const;
    /// With per-edge compression: one object per out-neighbour, {peer, out, codecs: {name:
    /// deltas}} (names: "channel", "raw", then each tier's compressor); else null.
    json::Json edge_metrics() const override;
    bool acts_on_edge_speeds() const override { return codecs_.on(); }
    /// Re-sync requests sent, and full replicas sent in answer to others' requests.
    std::uint64_t resync_requests() const noexcept { return resync_requests_; }
    std::uint64_t resync_answers() const noexcept { return resync_answers_; }
    /// With the partition_ready option, on a host worker with partitions and no multirate.
    bool takes_partition_ready() const override;
    /// Channels sent before their step ended (partition_ready), in all.
    std::uint64_t early_sends() const noexcept { return early_sends_; }

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

  private:
    // One replica x_hat: host floats, or device memory when the worker has a device.
    struct Xhat {
        std::vector<float> host;
        DeviceVector dev;
        std::span<const float> view() const {
            return dev.empty() ? std::span<const float>(host) : std::span<const float>(dev.span());
        }
    };
    struct Slot {  // one x_hat that neighbours track, and its message count
        Xhat xhat;
        std::uint64_t next_seq = 0;
        std::int64_t last_round = -1;
    };
    struct OutEdge {
        Slot slot;                          // per-edge mode; in shared mode only the message count
        std::vector<std::uint64_t> codecs;  // deltas sent by codec id (per-edge compression)
        RecentSends recent;                 // to judge re-sync requests
    };
    struct InEdge {
        Xhat xhat;
        std::uint64_t next_seq = 0;
        std::int64_t covered = -1;
        std::map<std::uint64_t, Message> queued;  // by edge_seq
    };

    // One partition's gossip state (the whole model when there is no multirate).
    struct Channel : PartitionChannel {
        std::uint32_t slot = 0;                // its index in channels_ (codec streams)
        std::int64_t round = 0;                // r_p: topology rounds this channel has mixed
        const optim::Compressor* q = nullptr;  // compressor, or the protocol's compressor_
        Slot own;                              // shared mode
        std::map<int, OutEdge> out;
        std::map<int, InEdge> in;
    };

    bool due(const Channel& c) const;
    void send_round(Time now, Actions& out);
    /// Sends channel c's round (send_round's inner loop).
    void send_channel(Time now, Channel& c, Actions& out);
    /// x <- x + gamma sum_j W_ij (x_hat_j - x_hat_i) on channel c (round c.round), then ++round.
    void mix_channel(Channel& c);
    /// x's range of channel c: params() between steps, a ready range during one.
    std::span<float> x_of(const Channel& c);
    // partition_ready (choco_ready.cpp): mix, step and send what the ready partitions allow.
    void advance_ready(Time now, Actions& out);
    bool round_in(Channel& c);
    void reset_ready();
    void check_ready_option() const;
    bool mixed_early(const Channel& c) const {
        return c.slot < early_mixed_.size() && early_mixed_[c.slot];
    }
    bool sent_early(const Channel& c) const {
        return c.slot < early_sent_.size() && early_sent_[c.slot];
    }
    Message encode(Channel& c, Slot& slot, int receiver_or_all);
    // x_hat <- the host floats `values` (a full model received).
    void take(Xhat& xhat, std::vector<float> values);
    // The host floats of x_hat (a re-sync).
    std::vector<float> payload_of(const Xhat& xhat) const;
    void try_mix(Time now, Actions& out);
    /// Delayed rule: the previous round is mixed (or there was none): apply the step's
    /// gradient, send its round, start the next step (or wait for the last round).
    void after_delayed_mix(Time now, Actions& out);
    void advance(Channel& c, int j, InEdge& e);
    void answer_resync(Time now, Channel& c, int j, std::uint64_t seq, Actions& out);
    optim::CodecKey key(const Channel& c, int sender, int receiver, std::uint64_t seq) const;

    ChocoOptions options_;
    std::unique_ptr<optim::Compressor> compressor_;
    EdgeCodecs codecs_;  // per-edge compression, off without tiers
    bool shared_ = true;
    bool waiting_ = false;
    std::int64_t t_ = 0;
    std::int64_t sent_ = 0;      // rounds sent
    bool grad_pending_ = false;  // delayed: a finished step's gradient is not applied yet
    std::vector<Channel> channels_;
    ChannelIndex index_;  // (partition, chunk) -> slot in channels_
    /// The channel of (partition, chunk) on the wire, or nullptr.
    Channel* channel_of(const Message& msg);
    std::vector<int> base_out_;  // shared mode: out-neighbours of the union over the period
    std::set<int> dead_;
    std::vector<float> scratch_;
    DeviceVector dscratch_;  // scratch_ on the worker's device
    std::uint64_t next_deadline_ = 1, armed_deadline_ = 0;
    SendsInFlight in_flight_;  // data sends not completed yet, by send id
    std::uint64_t resync_requests_ = 0, resync_answers_ = 0;
    // partition_ready, per channel slot / partition id, for the running step.
    std::vector<char> early_mixed_, early_sent_, stepped_;
    std::vector<std::pair<std::size_t, std::size_t>> channel_parts_;  // [first, last] partition
    std::uint64_t early_sends_ = 0;
};

/// The "choco" protocol with its options (nullptr: defaults). Throws as parse_choco_options and
/// the constructor.
std::unique_ptr<Protocol> make_choco(const json::Node* options, PeerContext ctx);

}  // namespace gossamer::proto
