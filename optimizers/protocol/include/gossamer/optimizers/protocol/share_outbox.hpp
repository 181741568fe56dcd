#pragma once
/// One push-sum share in flight per out-edge (docs/algorithms/protocol-contract.md, "The outbox"):
/// while a share to j is in flight, later shares to j add up here (payloads add, weights add, so
/// mass stays exact) and leave as one message when the driver reports the in-flight one complete.
///
/// The protocol (sgp, async) asks free(j) before it sends, records the send id with sent(), and
/// hands completions to completed(), which returns the share now due on that edge. Only shares
/// go through it; control messages never wait.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "gossamer/optimizers/protocol/protocol.hpp"
#include "gossamer/optimizers/protocol/small_containers.hpp"

namespace gossamer::proto {

class ShareOutbox {
  public:
    /// True when no share of this peer's is in flight to `to`.
    bool free(int to) const;
    /// Shares of this peer's in flight, on all edges together.
    std::size_t in_flight() const;
    /// The share with send id `id` (Send::id) left for `to`: the edge is busy until completed(id).
    void sent(int to, std::uint64_t id) { sent(to, std::span<const std::uint64_t>(&id, 1)); }
    /// A share cut into chunks (share_chunks.hpp) left for `to` as the sends `ids`: one share in
    /// flight, the edge busy until every one of them completed. Throws Error when it was busy.
    void sent(int to, std::span<const std::uint64_t> ids);
    /// Adds share `m` into the pending share of its receiver's edge (the first one is kept as
    /// is): payloads add element by element, weights add; round and edge_seq become m's (the
    /// latest), sent_at stays the earliest. Throws Error for payloads of different lengths.
    void hold(Message m);
    /// Send `id` completed (delivered or failed). When it was the last of its share's sends the
    /// edge is free, and the share pending on it, if any, is returned for the caller to send
    /// (then sent()). An id it does not know (a control message) returns nothing.
    std::optional<Message> completed(std::uint64_t id);
    /// Takes the share pending for `to` (its receiver failed: the mass goes back to the sender).
    std::optional<Message> take(int to);

    /// Shares waiting in all, and the weight they carry.
    std::size_t pending() const noexcept { return pending_; }
    double pending_weight() const;
    /// Shares that were added into an already pending one (so never sent on their own).
    std::uint64_t merged() const noexcept { return merged_; }

  private:
    // 24 bytes an out-edge (a simulated job holds one per out-edge of each peer): a whole share's
    // send id inline, a chunked share's ids and the pending share only while there are any.
    struct Edge {
        std::uint64_t one = 0;  // the send id of the whole share in flight (0: none)
        std::unique_ptr<std::vector<std::uint64_t>> chunks;  // a chunked share's sends left
        std::unique_ptr<Message> waiting;
        bool busy() const noexcept { return one != 0 || (chunks && !chunks->empty()); }
        std::uint64_t first() const noexcept { return one != 0 ? one : chunks->front(); }
    };
    FlatMap<int, Edge> edges_;
    std::size_t pending_ = 0;
    std::uint64_t merged_ = 0;
};

}  // namespace gossamer::proto
