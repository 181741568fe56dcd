// Checkpoints and resume at a protocol's consistent cut (docs/operations/checkpoint.md): the base
// class's part. Each protocol that resumes says where its cut is (cut()) and what its state holds
// (save_state / restore_state, in <name>_state.cpp).
#include <fmt/format.h>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocol/protocol.hpp"

namespace gossamer::proto {

std::string Protocol::resume_refusal() const {
    return fmt::format(
        "algorithm {} cannot checkpoint and resume (dpsgd, allreduce, sgp and async can)", name());
}

void Protocol::enable_checkpoints(std::int64_t every) {
    if (every < 0) throw Error(fmt::format("checkpoint interval {} is negative", every));
    if (every > 0) {
        std::string why = resume_refusal();
        if (why.empty() && !ctx_.worker->checkpointable())
            why = fmt::format("algorithm {}: this worker (a device's) cannot be checkpointed",
                              name());
        if (!why.empty())
            throw ConfigError("", "--checkpoint-every", why, "use 0 (no checkpoints)");
    }
    checkpoint_every_ = every;
}

bool Protocol::checkpoint_due(std::int64_t step) const noexcept {
    return checkpoint_every_ > 0 && step > 0 && step % checkpoint_every_ == 0 &&
           step < ctx_.max_steps && step != resumed_at_;
}

void Protocol::cut(std::int64_t step) {
    if (!checkpoint_due(step)) return;
    StateWriter w;
    w.tag("worker");
    ctx_.worker->save_state(w);
    w.tag(name());
    w.i64(step);
    save_state(w);
    snapshot_ = Snapshot{step, w.bytes()};
}

std::optional<Snapshot> Protocol::take_snapshot() {
    std::optional<Snapshot> s;
    s.swap(snapshot_);
    return s;
}

void Protocol::restore(const std::string& label, std::string_view state) {
    if (auto why = resume_refusal(); !why.empty()) throw ConfigError(label, "", why);
    if (!ctx_.worker->checkpointable())
        throw ConfigError(
            label, "", fmt::format("algorithm {}: this worker (a device's) cannot resume", name()));
    StateReader r(label, state);
    r.tag("worker");
    ctx_.worker->restore_state(r);
    r.tag(name());
    const std::int64_t step = r.counter("the cut's step");
    if (step <= 0 || step >= ctx_.max_steps)
        r.fail(fmt::format("the cut at step {} is not inside this job's {} steps", step,
                           ctx_.max_steps));
    if (ctx_.worker->steps() != step)
        r.fail(fmt::format("the worker took {} steps but the cut is at step {}",
                           ctx_.worker->steps(), step));
    restore_state(r);
    r.finish();
    resumed_at_ = step;
}

}  // namespace gossamer::proto
