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
/// All-reduce cannot tolerate a failure: on peer_failed the protocol records the dead rank
/// (failed_rank()) and answers done; drivers report "rank R failed; all-reduce stops".

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <utility>
#include <vector>

#include "gossamer/core/json.hpp"
#include "gossamer/optimizers/device.hpp"
#include "gossamer/optimizers/protocol.hpp"

namespace gossamer::proto {

struct AllreduceOptions {
    /// H: 1 averages gradients every step (data-parallel SGD); H > 1 is local SGD: every peer
    /// applies its own gradient and the models x are averaged after every H-th step and after
    /// the last step. >= 1.
    int period = 1;
    /// Chunks per ring segment (1 to 65536): each chunk is its own message, forwarded as soon
    /// as it arrives, so a segment's transfer is pipelined along the ring.
    int chunks = 1;
};

/// Reads {"period": H, "chunks": C} (nullptr: the defaults). Throws ConfigError naming the JSON
/// path of an unknown key, a wrong type or a value out of range.
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
    /// result buffer (docs/protocols.md, "Memory").
    std::span<float> receive_into(const Message& header) override;
    /// Resumes bit for bit (allreduce_state.cpp).
    std::string resume_refusal() const override { return ""; }

  protected:
    void on_start(Time now, Actions& out) override;
    void on_step_finished(Time now, double loss, Actions& out) override;
    void on_message(Time now, Message msg, Actions& out) override;
    void on_peer_failed(Time now, int rank, Actions& out) override;
    void on_send_completed(Time now, std::uint64_t id, bool ok, Actions& out) override;
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
    std::map<std::pair<std::int64_t, std::uint32_t>, Message> pending_;  // (round, chunk)
    std::optional<int> failed_rank_;
    std::vector<std::vector<float>> spare_;  // absorbed payloads, reused by the next sends
    std::set<std::uint64_t> lent_;           // zero-copy sends of local_ or acc_ in flight
    bool finishing_ = false;                 // the result is complete; lent_ still in flight
};

/// The factory the protocol registry calls for "allreduce".
std::unique_ptr<Protocol> make_allreduce(const json::Node* options, PeerContext ctx);

}  // namespace gossamer::proto
