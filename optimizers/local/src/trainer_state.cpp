// Checkpoints of the local computation (docs/operations/checkpoint.md): a LocalTrainer's
// parameters, step count, per-partition work and each partition's optimizer state. The batch order
// and the learning rate are functions of the step count (BatchLoader::at_step, LrSchedule::at), so
// the step count is the whole of the data-shuffling state.
#include <fmt/format.h>

#include "gossamer/optimizers/local/local_trainer.hpp"

namespace gossamer::optim {

void LocalOptimizer::save(StateWriter& w) const {
    w.string(to_string(config_.kind));
    w.i64(steps_);
    for (const auto* b : const_cast<LocalOptimizer*>(this)->buffers()) w.floats(*b);
}

void LocalOptimizer::restore(StateReader& r) {
    const std::string kind = r.string("optimizer name");
    if (kind != to_string(config_.kind))
        r.fail(fmt::format("the optimizer is {} in the checkpoint and {} in this job", kind,
                           to_string(config_.kind)));
    const auto steps = r.counter("optimizer steps");
    if (steps < 0) r.fail(fmt::format("optimizer steps {} is negative", steps));
    for (auto* b : buffers()) r.floats_into("an optimizer buffer", *b);
    steps_ = steps;
}

void LocalTrainer::save_state(StateWriter& w) const {
    w.floats(params_.span());
    w.i64(steps_);
    w.u64(optimizers_.size());
    for (std::size_t id = 0; id < optimizers_.size(); ++id) {
        optimizers_[id]->save(w);
        w.i64(work_[id].updates);
        w.u64(work_[id].backward_macs);
    }
}

void LocalTrainer::restore_state(StateReader& r) {
    r.floats_into("the parameters", params_.span());
    const auto steps = r.i64("trainer steps");
    if (steps < 0) r.fail(fmt::format("trainer steps {} is negative", steps));
    const auto parts = r.u64("partition count");
    if (parts != optimizers_.size())
        r.fail(fmt::format("{} partitions in the checkpoint, {} in this job", parts,
                           optimizers_.size()));
    for (std::size_t id = 0; id < optimizers_.size(); ++id) {
        optimizers_[id]->restore(r);
        work_[id].updates = r.i64("partition updates");
        work_[id].backward_macs = r.u64("partition work");
    }
    steps_ = steps;
}

}  // namespace gossamer::optim
