#pragma once
// A real peer's hooks into a trace::Recorder (docs/formats/trace.md), called by the driver's
// communication loop only. Without a trace it still follows what ended each wait (cheap), for
// the metrics line's "wait" and "waited_for" (gossamer launch's live view); the rest is a no-op.
//
// Steps come from the compute thread's records (their end when the loop took them, their
// duration as measured, padding included); the waits are the gaps between them, so step and
// wait durations add up to the driver's end time, exactly as busy + idle do.

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gossamer/bootstrap/clock.hpp"
#include "gossamer/core/json.hpp"
#include "gossamer/core/trace.hpp"
#include "gossamer/transport/message.hpp"

namespace gossamer::peer {

/// The wait before a step: its seconds and the neighbour whose message ended it (-1: none).
struct StepWait {
    double seconds = 0;
    int peer = -1;
};

class PeerTracer {
  public:
    /// Records into a new recorder when `path` is not empty (the file is written by finish()).
    /// `clock`: this host's clock against rank 0's, for otherData.clock_offset
    /// (docs/formats/trace.md).
    PeerTracer(int rank, const std::string& path, std::size_t limit_bytes,
               std::chrono::system_clock::time_point origin,
               const std::optional<bootstrap::ClockOffset>& clock = std::nullopt)
        : rank_(rank), path_(path) {
        if (path.empty()) return;
        const double us =
            std::chrono::duration<double, std::micro>(origin.time_since_epoch()).count();
        r_ = std::make_unique<trace::Recorder>("steady", limit_bytes, us);
        trace::KindNames names;
        for (int k = 0; k <= static_cast<int>(transport::MessageKind::control); ++k)
            names.emplace_back(transport::to_string(static_cast<transport::MessageKind>(k)));
        r_->set_kind_names(std::move(names));
        r_->set_info("rank", rank);
        if (clock)
            r_->set_info("clock_offset", {{"offset_us", clock->offset_us},
                                          {"residual_us", clock->residual_us},
                                          {"round_trips", clock->samples}});
    }
    void cause(trace::WaitCause c) noexcept { cause_ = c; }
    void send(double now, const transport::Message& m) {
        if (r_) r_->send(rank_, now, m.receiver, m.wire_bytes(), m.round, static_cast<int>(m.kind));
    }
    void receive(double now, const transport::Message& m) {
        cause_ = {trace::WaitCause::message, m.sender, m.round};
        if (r_)
            r_->receive(rank_, now, m.sender, m.wire_bytes(), m.round, static_cast<int>(m.kind));
    }
    /// The loop asks for a step: what ended the wait before it is the event just delivered.
    void starting() noexcept {
        wait_cause_ = last_end_ > 0 ? cause_ : trace::WaitCause{trace::WaitCause::start};
    }
    /// A step of `took` seconds the loop took at `now`.
    StepWait step(double now, double took, std::int64_t step, double loss) {
        const double start = std::max(last_end_, now - took);
        const StepWait w{start - last_end_,
                         wait_cause_.kind == trace::WaitCause::message ? wait_cause_.peer : -1};
        if (r_) {
            r_->wait(rank_, last_end_, start, wait_cause_);
            r_->step(rank_, start, now, step, loss);
        }
        last_end_ = now;
        cause_ = {};
        return w;
    }
    /// Under "outer": round `round` of `inner` inner steps (H = `h`, the first `first_inner`)
    /// that took `took` seconds until `now`; the inner steps split it evenly (the compute
    /// thread times the round, padding included, not each step).
    StepWait round(double now, double took, std::int64_t round, std::int64_t first_inner,
                   std::int64_t inner, std::int64_t h, double loss) {
        const double start = std::max(last_end_, now - took);
        const StepWait w{start - last_end_,
                         wait_cause_.kind == trace::WaitCause::message ? wait_cause_.peer : -1};
        if (r_) {
            r_->wait(rank_, last_end_, start, wait_cause_);
            std::vector<double> ends(static_cast<std::size_t>(std::max<std::int64_t>(inner, 1)));
            for (std::size_t j = 0; j < ends.size(); ++j)
                ends[j] = j + 1 == ends.size()
                              ? now
                              : start + (now - start) * static_cast<double>(j + 1) /
                                            static_cast<double>(ends.size());
            r_->round(rank_, start, ends, round, first_inner, h, loss);
        }
        last_end_ = now;
        cause_ = {};
        return w;
    }
    void peer_failed(double now, int dead) {
        cause_ = {trace::WaitCause::failure, dead, -1};
        if (r_) r_->peer_failed(rank_, now, dead);
    }
    /// An evaluation line of the peer's evaluator ({"at", "accuracy", "loss"}).
    void evaluation(const json::Json& line) {
        if (r_ && line.contains("accuracy") && line.contains("at"))
            r_->evaluation(rank_, line["at"].get<double>(), line["at"].get<double>(),
                           line["accuracy"].get<double>(), line.value("loss", 0.0));
    }
    /// The peer ended at `end` (failed: its emulated failure): the last wait, then the file.
    void finish(double end, bool failed) {
        if (!r_) return;
        if (end > last_end_) r_->wait(rank_, last_end_, end, {trace::WaitCause::finish});
        if (failed) r_->failure(rank_, end);
        r_->write(path_);
    }

  private:
    int rank_;
    std::string path_;
    std::unique_ptr<trace::Recorder> r_;
    trace::WaitCause cause_, wait_cause_{trace::WaitCause::start};
    double last_end_ = 0;
};

}  // namespace gossamer::peer
