#pragma once
/// The recent data messages of one directed edge, kept by dpsgd and choco to judge a re-sync
/// request for one of them (docs/algorithms/dpsgd.md, "Loss and reordering"): a message still being
/// sent is slow, not lost, so it is never answered with another full model while in flight.
/// Before 2026-12-06 a request was answered once the message had been *posted* resync_timeout
/// ago; behind a 100 Mbit/s link a 23 MB model posted 5 s ago was often still in flight, every
/// answer added another model to the queue, and dpsgd on the lab's uneven8 sent 2.5x its
/// models (docs/operations/lab.md).

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>

#include "gossamer/optimizers/protocol/growing_window.hpp"
#include "gossamer/optimizers/protocol/protocol.hpp"

namespace gossamer::proto {

class RecentSends {
  public:
    static constexpr std::size_t kWindow = 16;

    /// Message `seq` left as send `send_id`; in flight until completed().
    void posted(std::uint64_t seq, std::uint64_t send_id) {
        if (window_.capacity() == 0) window_.set_capacity(kWindow);
        window_.push_back({seq, send_id, -1.0, true});
    }
    /// Send `send_id` completed at `now` (ok: the transport took all of it); nothing when it is
    /// no longer in the window.
    void completed(std::uint64_t send_id, Time now, bool ok) {
        for (std::size_t k = 0; k < window_.size(); ++k)
            if (window_[k].id == send_id) {
                window_[k].done = now;
                window_[k].ok = ok;
                return;
            }
    }
    /// Whether a request for message `seq` is answered with a full model now: not while that
    /// message is in flight, nor within `timeout` of its completion (it may still arrive); yes
    /// once its send failed, `timeout` after it completed, or when it is older than the window.
    bool answer(std::uint64_t seq, Time now, Time timeout) const {
        for (std::size_t k = 0; k < window_.size(); ++k) {
            const Entry& e = window_[k];
            if (e.seq != seq) continue;
            if (e.done < 0) return false;
            if (e.ok && now - e.done < timeout) return false;
        }
        return true;
    }
    /// Forgets every send (a stream that restarts).
    void clear() { window_.set_capacity(0); }

  private:
    struct Entry {
        std::uint64_t seq = 0, id = 0;
        Time done = -1;  // < 0: in flight
        bool ok = true;
    };
    GrowingWindow<Entry> window_;
};

/// Which edge each send in flight belongs to, so that its completion finds its RecentSends.
class SendsInFlight {
  public:
    using Edge = std::pair<std::uint32_t, int>;  // (channel slot, receiver)
    void add(std::uint64_t send_id, Edge e) { edge_[send_id] = e; }
    /// The edge of a completed send, forgotten now; nullopt for a send not recorded here.
    std::optional<Edge> take(std::uint64_t send_id) {
        const auto it = edge_.find(send_id);
        if (it == edge_.end()) return std::nullopt;
        const Edge e = it->second;
        edge_.erase(it);
        return e;
    }

  private:
    std::unordered_map<std::uint64_t, Edge> edge_;
};

}  // namespace gossamer::proto
