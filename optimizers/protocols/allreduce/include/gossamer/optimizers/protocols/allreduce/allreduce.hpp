#pragma once
/// The all-reduce baseline: synchronous data-parallel SGD over a ring all-reduce
/// (reduce-scatter then all-gather, ring.hpp), or local SGD with periodic model averaging.
///
/// Every peer computes a gradient at x, the gradients are averaged over all n peers and every
/// peer applies the same average with the same optimizer. Each segment of the sum is added up in
/// one fixed order along the ring and divided by n by the peer that owns it; the all-gather
/// copies those bytes, so all peers hold bitwise-identical results. Peers stay identical as long
/// as they start from the same x (every driver initialises the model from the job's seed, the
/// same on every peer) and run the same optimizer.
///
/// Messages (MessageKind::reduce) carry: round = the all-reduce number (0, 1, ...), chunk = the
/// message's index k * chunks + c within the all-reduce (schedule step k, chunk c), offset = the
/// first element of the values in x, elements = how many, edge_seq = messages sent so far on
/// the edge to rank + 1. Each peer sends exactly 2(n - 1) * chunks messages per all-reduce
/// (empty chunks included) to rank + 1 only. Messages may arrive before this peer is ready for
/// them (a neighbour's next all-reduce while this peer still computes): they wait in a buffer.
///
/// Payloads of absorbed messages are kept (at most `chunks` of them) and reused for the next
/// messages this peer sends, so a driver that hands sent payloads back to its transport
/// (Transport::recycle) moves no freshly allocated memory at steady state.
///
/// Membership (`"elastic"`, docs/operations/elastic.md, allreduce_elastic.cpp). `stop` (the
/// default): a failure stops the job: on peer_failed the protocol records the dead rank
/// (failed_rank()) and answers done; drivers report "rank R failed; all-reduce stops". `rebuild`:
/// the ring is rebuilt over the live members at a round boundary (as torchrun's and Horovod's
/// elastic modes): a failure, a graceful leave or a join aborts the running all-reduce; the lowest
/// live member proposes the new ring (an epoch), every member answers between two steps, and the
/// member furthest ahead sends its whole worker state (x, optimizer state, step count) to the
/// others, so every member starts the epoch identical. `restart`: the same, but the state sent
/// is the last in-memory checkpoint (every `checkpoint_every` steps) and every member then waits
/// `restart_seconds`: a job restarted from its checkpoint on every change (torchrun's default).

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

#include "gossamer/core/json.hpp"
#include "gossamer/optimizers/protocol/device.hpp"
#include "gossamer/optimizers/protocol/protocol.hpp"

namespace gossamer::proto {

struct AllreduceOptions {
    /// H: 1 averages gradients every step (data-parallel SGD); H > 1 is local SGD: every peer
    /// applies its own gradient and the models x are averaged after every H-th step and after
    /// the last step. >= 1.
    int period = 1;
    /// Chunks per ring segment (1 to 65536): each chunk is its own message, forwarded as soon
    /// as it arrives, so a segment's transfer is pipelined along the ring.
    int chunks = 1;
    enum class Elastic { stop, rebuild, restart };
    /// What a change of membership does: stop the job (default), rebuild the ring, or restart
    /// every member from the last checkpoint.
    Elastic elastic = Elastic::stop;
    /// restart: steps between two in-memory checkpoints (>= 1).
    std::int64_t checkpoint_every = 100;
    /// restart: seconds every member waits after a change before it steps again (the restart
    /// of its process and the load of the checkpoint).
    double restart_seconds = 0.0;
    /// `"hierarchy": {"rack_size": k}`: the rack-aware all-reduce over racks of k consecutive
    /// ranks (hierarchical.hpp); 0: the ring.
    int rack_size = 0;
};

/// Reads {"period": H, "chunks": C, "elastic": "stop" | "rebuild" | "restart",
/// "checkpoint_every": K, "restart_seconds": S, "hierarchy": {"rack_size": k}} (nullptr: the
/// defaults). Throws ConfigError naming the JSON path of an unknown key, a wrong type or a value
/// out of range.
AllreduceOptions parse_allreduce_options(const json::Node* options);

class AllreduceProtocol final : public Protocol {
  public:
    /// Throws ConfigError (path "period" or "chunks") for options out of range.
    AllreduceProtocol(PeerContext ctx, AllreduceOptions options = {});

    std::string_view name() const override { return "allreduce"; }
    /// x: gradients are computed at the shared model.
    std::span<const float> compute_point() override;
    /// Copies x into `out` (size() values; math mode only).
    void current_model(std::span<float> out) const override;

    /// The rank whose failure stopped this peer, or nullopt when none failed before it was done.
    std::optional<int> failed_rank() const noexcept { return failed_rank_; }
    const AllreduceOptions& options() const noexcept { return options_; }
    /// Local steps finished so far.
    std::int64_t steps_finished() const noexcept { return steps_finished_; }
    /// Messages received ahead of time and not yet used.
    std::size_t buffered() const noexcept { return pending_.size(); }
    /// Zero-copy: an all-gather chunk of the running all-reduce lands in its place in the
    /// result buffer (docs/algorithms/protocol-contract.md, "Memory").
    std::span<float> receive_into(const Message& header) override;
    std::span<const float> placed_values(const Message& msg) const override;
    std::optional<NonFinite> first_non_finite_value(const Message& msg,
                                                    std::span<const float> values) const override;
    /// Resumes bit for bit (allreduce_state.cpp).
    std::string resume_refusal() const override { return ""; }
    /// "" with `"elastic": "rebuild"` or `"restart"` on a worker that can hand its state over.
    std::string elastic_refusal() const override;
    /// Without "elastic" (elastic_refusal() not ""), a failure stops the ring: failed_rank().
    bool failure_stops_job() const override { return !elastic_refusal().empty(); }
    std::optional<int> stopped_by() const override { return failed_rank_; }
    /// Elastic modes: done, and every member of the ring said it is done too (or is gone), so
    /// no member can still need this peer's state.
    bool settled() const override;
    std::vector<int> settling_on() const override;

  protected:
    void on_start(Time now, Actions& out) override;
    void on_step_finished(Time now, double loss, Actions& out) override;
    void on_message(Time now, Message msg, Actions& out) override;
    void on_peer_failed(Time now, int rank, Actions& out) override;
    void on_send_completed(Time now, std::uint64_t id, bool ok, Actions& out) override;
    void on_deadline(Time now, std::uint64_t id, Actions& out) override;
    void on_peer_absent(int rank) override;
    void on_join(Time now, Entry entry, Actions& out) override;
    void on_leave(Time now, Actions& out) override;
    void save_state(StateWriter& w) const override;
    void restore_state(StateReader& r) override;

  private:
    bool averages_gradients() const noexcept { return options_.period == 1; }
    void begin_allreduce(std::span<const float> local, Actions& out);
    Message header(int k, int c);  // the header of step k's chunk c (takes an edge_seq)
    void send_chunk(int k, int c, Actions& out);
    void check(const Message& msg) const;
    void absorb(Message& msg);
    void absorb_on_device(const Message& msg, bool average, bool reduce);
    void progress(Actions& out);
    void finish_allreduce(Actions& out);
    void next_step(Actions& out);
    int m() const noexcept { return static_cast<int>(members_.size()); }
    int prev() const noexcept { return members_[static_cast<std::size_t>((pos_ + m() - 1) % m())]; }
    bool zc() const noexcept {
        return zero_copy() && options_.elastic == AllreduceOptions::Elastic::stop;
    }
    bool elastic() const noexcept { return options_.elastic != AllreduceOptions::Elastic::stop; }

    // Elastic modes (allreduce_elastic.cpp).
    void set_ring(std::vector<int> members);
    bool in_ring(int rank) const;
    int leader() const;
    std::int64_t standing() const;  // what a ready answer says: how far this peer is
    std::vector<char> pack_state() const;
    void adopt(std::span<const char> state);
    void on_control(Time now, Message& msg, Actions& out);
    void lost(Time now, int rank, Actions& out);
    void abort_round();
    void propose(Actions& out);
    void answer(Actions& out);
    void maybe_choose_source(Actions& out);
    void send_sync(const std::vector<int>& to, Actions& out);
    void take_sync(Message& msg, Actions& out);
    void install(std::int64_t key, std::vector<int> members, Actions& out);
    void announce_done(Actions& out);
    void leave_now(Actions& out);
    void step_after_change(Actions& out);
    bool at_boundary(Actions& out);
    void send_control(Actions& out, int to, std::uint32_t code, std::int64_t key,
                      std::uint64_t value = 0, const std::vector<int>& ranks = {});
    Time now_ = 0;  // the event being handled (elastic modes send control messages from it)

    AllreduceOptions options_;
    bool math_;  // the worker has values (not cost-only)
    std::size_t length_;
    int steps_;                        // ring::steps(n)
    std::vector<float> acc_;           // the all-reduce buffer (math mode, host memory)
    std::span<const float> local_;     // this rank's input to the running all-reduce
    Device* device_;                   // where x lives (nullptr: host memory)
    DeviceVector dacc_;                // the all-reduce buffer on the device
    std::vector<int> next_;            // per chunk: the schedule step awaited next
    std::int64_t round_ = 0;           // the current (or next) all-reduce
    bool active_ = false;              // this peer has joined all-reduce round_
    std::int64_t steps_finished_ = 0;  // local steps finished
    std::uint64_t edge_seq_ = 0;       // messages sent to rank + 1
    // (ring key, round, chunk): messages of a later ring wait for it (elastic modes).
    std::map<std::tuple<std::int64_t, std::int64_t, std::uint32_t>, Message> pending_;
    std::optional<int> failed_rank_;
    std::vector<std::vector<float>> spare_;  // absorbed payloads, reused by the next sends
    std::set<std::uint64_t> lent_;           // zero-copy sends of local_ or acc_ in flight
    bool finishing_ = false;                 // the result is complete; lent_ still in flight

    // Membership (elastic modes). key_: the installed ring's epoch key (epoch * n + proposer).
    std::vector<int> members_;             // the ring, by rank
    int pos_ = 0;                          // this peer's place in members_
    std::vector<char> alive_;              // per rank: a live member or a joiner
    std::set<int> joiners_;                // announced, not in the ring yet
    std::set<int> finished_;               // members that said they are done
    std::int64_t key_ = 0, accepted_ = 0;  // installed ring; newest proposal answered
    std::vector<int> accepted_members_;    // the ring of the accepted proposal
    std::int64_t max_epoch_ = 0;           // the highest epoch seen
    bool syncing_ = false;                 // the running all-reduce is abandoned
    bool answer_after_step_ = false;       // answer the accepted proposal at step_finished
    bool want_propose_ = false;            // propose at the next step boundary (leader)
    bool leaving_ = false;                 // leave at the next round boundary
    bool restarting_ = false;              // restart mode: waiting restart_seconds
    struct Proposal {
        std::int64_t key = -1;
        std::vector<int> members;
        std::map<int, std::int64_t> ready;  // member -> progress
    } proposal_;                            // this peer's own proposal (leader)
    std::vector<float> sync_in_;            // the state arriving in pieces
    std::uint64_t sync_got_ = 0;
    std::int64_t sync_key_ = -1;    // the proposal sync_in_ belongs to
    std::vector<char> checkpoint_;  // restart mode: the last in-memory checkpoint
    std::int64_t checkpoint_step_ = -1;
};

/// The factory the protocol registry calls for "allreduce".
std::unique_ptr<Protocol> make_allreduce(const json::Node* options, PeerContext ctx);

}  // namespace gossamer::proto
