#include "gossamer/optimizers/protocols/async/link_aware.hpp"

#include <algorithm>
#include <cmath>

#include "gossamer/optimizers/protocols/async/async_gossip.hpp"

namespace gossamer::proto {

double link_factor(std::optional<double> share_seconds, double own_rate, double power,
                   double floor) noexcept {
    if (!share_seconds || !(*share_seconds > 0) || !(own_rate > 0)) return 1.0;
    const double step = 1.0 / own_rate;
    const double f = std::pow(std::min(1.0, step / *share_seconds), power);
    return std::max(f, floor);
}

// The async protocol's hook (async_gossip.hpp), kept here with the rule it applies.
double AsyncGossip::link_weight(int j, double r_self) const {
    if (!options_.link_aware) return 1.0;
    const std::uint64_t share = transport::kHeaderBytes + context().worker->size() * sizeof(float);
    return link_factor(edge_speeds().seconds_for(j, share), r_self, options_.link_power);
}

int AsyncGossip::keep_free_edges(std::vector<EdgeCandidate>& cands, int k,
                                 std::int64_t force_age) const {
    // A push to a busy edge would only add to its outbox: mass in transit, out of the mixing,
    // for as long as the slow edge takes. Keeping it here instead leaves w with the peers.
    // Through one queue (the simulator's uplink) a share behind another waits all the same:
    // every edge counts as busy while any share is in flight.
    const bool queue_busy = edge_speeds().options().one_queue && outbox_.in_flight() > 0;
    std::erase_if(cands, [&](const EdgeCandidate& c) {
        const bool forced = t_ - c.last_used >= force_age;
        return !forced && (queue_busy || !outbox_.free(c.peer));
    });
    return std::min(k, static_cast<int>(cands.size()));
}

void AsyncGossip::note_kept(double kept) {
    const double a = 1.0 / options_.rate_window;
    effective_self_ = (1 - a) * effective_self_ + a * kept;
}

double AsyncGossip::advertised_self() const {
    // A link-aware peer whose edges are busy pushes on fewer steps: what leaves it per step is
    // 1 - the effective share, and senders balance what they push here by that (outflow).
    return options_.link_aware ? effective_self_ : self_share_;
}

}  // namespace gossamer::proto
