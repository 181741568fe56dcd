// Checkpoints of both ends of a replica edge (docs/operations/checkpoint.md). Replicas are saved,
// never rebuilt: x_hat + (x - x_hat) is not x in floating point, so a rebuilt replica would drift
// from the other end's copy.
#include <fmt/format.h>

#include "gossamer/optimizers/protocol/edge_replica.hpp"

namespace gossamer::proto {

void ReplicaSender::save(StateWriter& w) const {
    w.u64(next_seq_);
    w.i64(last_round_);
    w.floats(replica_);
}

void ReplicaSender::restore(StateReader& r) {
    next_seq_ = r.u64("an out-edge's sequence number");
    last_round_ = r.counter("an out-edge's round");
    replica_ = r.floats("an out-edge's replica");
    if (!replica_.empty() && replica_.size() != size_)
        r.fail(fmt::format("an out-edge's replica holds {} values, the channel {}", replica_.size(),
                           size_));
    if (!math_ && !replica_.empty()) r.fail("a replica with values in a cost-only job");
}

void ReplicaReceiver::save(StateWriter& w) const {
    w.u64(next_seq_);
    w.i64(covered_);
    w.u64(gaps_);
    w.u64(stale_);
    w.u64(resyncs_);
    w.floats(replica_);
}

void ReplicaReceiver::restore(StateReader& r) {
    next_seq_ = r.u64("an in-edge's sequence number");
    covered_ = r.counter("an in-edge's round");
    gaps_ = r.u64("an in-edge's gaps");
    stale_ = r.u64("an in-edge's stale count");
    resyncs_ = r.u64("an in-edge's re-syncs");
    replica_ = r.floats("an in-edge's replica");
    if (!replica_.empty() && replica_.size() != size_)
        r.fail(fmt::format("an in-edge's replica holds {} values, the channel {}", replica_.size(),
                           size_));
    if (!math_ && !replica_.empty()) r.fail("a replica with values in a cost-only job");
    queued_.clear();
}

}  // namespace gossamer::proto
