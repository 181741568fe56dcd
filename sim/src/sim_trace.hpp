#pragma once
// The simulator's hooks into a trace::Recorder (docs/formats/trace.md): one call per place in the
// engine, each a no-op without a recorder, so that the engine stays readable.

#include <span>
#include <string>
#include <vector>

#include "gossamer/core/trace.hpp"
#include "gossamer/transport/message.hpp"

namespace gossamer::sim {

/// The kind names a trace gives messages (transport::to_string of each MessageKind value).
inline trace::KindNames message_kind_names() {
    trace::KindNames names;
    for (int k = 0; k <= static_cast<int>(transport::MessageKind::control); ++k)
        names.emplace_back(transport::to_string(static_cast<transport::MessageKind>(k)));
    return names;
}

class SimTracer {
  public:
    explicit SimTracer(trace::Recorder* r) : r_(r) {
        if (r_) r_->set_kind_names(message_kind_names());
    }
    bool on() const noexcept { return r_ != nullptr; }

    /// What the event now being handled would end a wait with.
    void cause(trace::WaitCause c) noexcept { cause_ = c; }
    void cause_message(const transport::Message& m) noexcept {
        cause_ = {trace::WaitCause::message, m.sender, m.round};
    }
    void send(int rank, double now, const transport::Message& m) {
        if (r_) r_->send(rank, now, m.receiver, m.wire_bytes(), m.round, static_cast<int>(m.kind));
    }
    void receive(int rank, double now, const transport::Message& m) {
        if (r_) r_->receive(rank, now, m.sender, m.wire_bytes(), m.round, static_cast<int>(m.kind));
    }
    /// A wait from `since` to `now` that the current cause ended (nothing when it took no time).
    void wait(int rank, double since, double now) {
        if (r_ && now > since) r_->wait(rank, since, now, cause_);
    }
    void wait(int rank, double since, double now, trace::WaitCause c) {
        if (r_ && now > since) r_->wait(rank, since, now, c);
    }
    void step(int rank, double start, double end, std::int64_t step, double loss) {
        if (r_) r_->step(rank, start, end, step, loss);
    }
    /// Under "outer": a round and its inner steps (trace::Recorder::round).
    void round(int rank, double start, std::span<const double> inner_ends, std::int64_t round,
               std::int64_t first_step, std::int64_t steps_per_round, double loss) {
        if (r_) r_->round(rank, start, inner_ends, round, first_step, steps_per_round, loss);
    }
    void failure(int rank, double now) {
        if (r_) r_->failure(rank, now);
    }
    void peer_failed(int rank, double now, int dead) {
        if (r_) r_->peer_failed(rank, now, dead);
    }
    void evaluation(double now, double accuracy, double loss) {
        if (r_) r_->evaluation(trace::kJobTrack, now, now, accuracy, loss);
    }
    /// One peer's own model judged at its step boundary (the loss is not computed: 0).
    void peer_evaluation(int rank, double now, double accuracy) {
        if (r_) r_->evaluation(rank, now, now, accuracy, 0.0);
    }

  private:
    trace::Recorder* r_;
    trace::WaitCause cause_;
};

}  // namespace gossamer::sim
