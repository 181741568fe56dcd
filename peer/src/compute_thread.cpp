#include "gossamer/peer/compute_thread.hpp"

#include <algorithm>
#include <cassert>

namespace gossamer::peer {
namespace {
constexpr double kMaxPadSeconds = 1e9;
// Rounds by time: the most inner steps one round is planned with (the worker bounds it again).
constexpr std::int64_t kMaxPlannedSteps = 1 << 16;
}  // namespace

using Clock = std::chrono::steady_clock;

ComputeThread::ComputeThread(proto::LocalWorker& worker, DeclaredStepTime declared,
                             std::function<void()> wake)
    : worker_(worker),
      declared_(std::move(declared)),
      wake_(std::move(wake)),
      thread_([this](std::stop_token stop) { loop(stop); }) {}

ComputeThread::~ComputeThread() {
    thread_.request_stop();
    cv_.notify_all();
}

void ComputeThread::start_on_comm(std::int64_t step, double start, std::span<const float> at) {
    assert(!busy_ && "a step is already running");
    busy_ = true;
    {
        std::lock_guard lock(mutex_);
        request_ = step;
        start_ = start;
        at_ = at;
    }
    cv_.notify_all();
}

std::optional<GradientDone> ComputeThread::take_computed_on_comm() {
    std::lock_guard lock(mutex_);
    std::optional<GradientDone> out;
    out.swap(computed_);
    return out;
}

std::optional<StepDone> ComputeThread::take_done_on_comm() {
    std::optional<StepDone> out;
    {
        std::lock_guard lock(mutex_);
        out.swap(done_);
        if (out) computed_.reset();  // its step is over
    }
    if (out) busy_ = false;
    return out;
}

std::int64_t ComputeThread::plan_round(double seconds, double start) const {
    const std::int64_t first = worker_.inner_steps();
    double t = 0;
    for (std::int64_t k = 0; k < kMaxPlannedSteps; ++k) {
        const double d =
            std::max(declared_ ? declared_(first + k, start + t) : 0.0, measured_step_);
        if (k > 0 && t + d > seconds * (1 + 1e-9)) return k;  // a step that ends at T fits
        // Nothing known yet (no padding, no round measured): one step, measured for the next.
        if (!(d > 0)) return k + 1;
        t += d;
    }
    return kMaxPlannedSteps;
}

void ComputeThread::loop(std::stop_token stop) {
    std::unique_lock lock(mutex_);
    while (!stop.stop_requested()) {
        if (!cv_.wait(lock, stop, [&] { return request_.has_value(); })) break;
        StepDone d;
        d.step = *request_;
        const std::span<const float> at = at_;
        const double start = start_;
        request_.reset();
        lock.unlock();
        // Under "outer" one call is a round of k inner steps, each padded as a step is. Only
        // the outer layer's counters are read here: they change on this thread (its inner steps)
        // or between steps; a plain worker's step count belongs to the communication thread.
        const bool rounds = worker_.takes_rounds();
        if (const double seconds = rounds ? worker_.round_seconds() : 0.0; seconds > 0)
            worker_.plan_round(plan_round(seconds, start));
        const std::int64_t k = rounds ? worker_.steps_per_gradient() : 1;
        const std::int64_t first_inner = rounds ? worker_.inner_steps() : d.step;
        d.inner = k;
        d.first_inner = first_inner;
        const auto t0 = Clock::now();
        d.loss = worker_.compute_gradient(at);
        d.measured = std::chrono::duration<double>(Clock::now() - t0).count();
        if (rounds) measured_step_ = d.measured / static_cast<double>(k);
        double declared = 0.0;
        if (declared_ && !rounds) declared = declared_(d.step, start);
        if (declared_ && rounds)
            for (std::int64_t j = 0; j < k; ++j)
                declared += declared_(first_inner + j, start + declared);
        lock.lock();
        computed_ = GradientDone{d.step, std::max(declared, d.measured)};
        if (declared > d.measured && wake_computed_) {  // padded: say so now, not only at its end
            lock.unlock();
            wake_();
            lock.lock();
        }
        if (declared > d.measured) {
            // Heterogeneity emulation: the step lasts its declared time; a stop cuts it short.
            // Converted with a bound (1e9 s, about 31 years): a double of seconds past ~9.2e9
            // overflows the clock's nanoseconds and would wrap to no padding at all.
            const double pad = std::min(declared, kMaxPadSeconds);
            const auto until = t0 + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(pad));
            cv_.wait_until(lock, stop, until, [] { return false; });
        }
        d.took = std::chrono::duration<double>(Clock::now() - t0).count();
        done_ = d;
        lock.unlock();
        wake_();
        lock.lock();
    }
}

}  // namespace gossamer::peer
