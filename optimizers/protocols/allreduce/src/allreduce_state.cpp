// allreduce's checkpoints (docs/operations/checkpoint.md). The cut is between two steps
// (next_step): the all-reduce before it is complete on this peer, so every message of it this peer
// must take was taken, and its successor cannot complete that all-reduce without the messages this
// peer sent. Messages of the next all-reduce that came early are not saved: after a resume their
// senders send them again. x and the optimizer state are the worker's, identical on every peer.
#include <fmt/format.h>

#include "gossamer/optimizers/protocols/allreduce/allreduce.hpp"

namespace gossamer::proto {

void AllreduceProtocol::save_state(StateWriter& w) const {
    w.i64(steps_finished_);
    w.i64(round_);
    w.u64(edge_seq_);
}

void AllreduceProtocol::restore_state(StateReader& r) {
    steps_finished_ = r.counter("allreduce steps");
    round_ = r.counter("allreduce round");
    edge_seq_ = r.u64("allreduce messages sent");
    if (steps_finished_ < 0 || round_ < 0 || round_ > steps_finished_)
        r.fail(
            fmt::format("allreduce round {} after {} steps is not a cut", round_, steps_finished_));
    if (steps_finished_ != worker().steps())
        r.fail(fmt::format("allreduce took {} steps but its worker {}", steps_finished_,
                           worker().steps()));
}

}  // namespace gossamer::proto
