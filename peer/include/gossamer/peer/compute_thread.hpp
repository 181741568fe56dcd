#pragma once
/// The compute side of a real peer: one thread that runs local steps when the communication
/// thread hands them over, pads each to its declared time, and wakes the communication thread
/// when the step is done.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <thread>

#include "gossamer/optimizers/protocol/protocol.hpp"

namespace gossamer::peer {

/// What one finished step reports.
struct StepDone {
    std::int64_t step = 0;
    double loss = 0;
    double measured = 0;  ///< seconds the gradient took
    double took = 0;      ///< seconds the step took: max(measured, declared)
    /// The worker's inner steps in it (under "outer" a round's, else 1) and the first one's
    /// index (LocalWorker::inner_steps before it): the trace's inner steps.
    std::int64_t inner = 1, first_inner = 0;
};

/// A running step whose gradient is computed (the rest of the step is padding): when it will end.
struct GradientDone {
    std::int64_t step = 0;
    double took = 0;  ///< seconds the step will take from its start: max(measured, declared)
};

/// Seconds step `step`, begun at `start` (seconds since the driver started), should take at
/// least (0: its natural time); the start lets slow periods of a cluster file apply. Runs on the
/// compute thread.
using DeclaredStepTime = std::function<double(std::int64_t step, double start)>;

class ComputeThread {
  public:
    /// `wake` is called (from the compute thread) after each step; it must be thread-safe
    /// (Transport::wake()).
    ComputeThread(proto::LocalWorker& worker, DeclaredStepTime declared,
                  std::function<void()> wake);
    /// Stops the thread; a running step finishes first (its padding is cut short).
    ~ComputeThread();
    ComputeThread(const ComputeThread&) = delete;
    ComputeThread& operator=(const ComputeThread&) = delete;

    /// Communication thread: starts step `step` at `start` (seconds since the driver started),
    /// the gradient at `at`. From now until
    /// take_done_on_comm() returns its result, the compute thread owns `at` and the worker's
    /// gradient. Only one step runs at a time.
    void start_on_comm(std::int64_t step, double start, std::span<const float> at);
    /// Communication thread: the finished step, if there is one (then no step runs).
    std::optional<StepDone> take_done_on_comm();
    /// Communication thread: the running step's gradient is computed and will not change (the
    /// compute thread only pads the step from now on), once per step; nothing otherwise.
    std::optional<GradientDone> take_computed_on_comm();
    /// Communication thread, before the first step: also call `wake` when a padded step's
    /// gradient is computed (for take_computed_on_comm: partition-ready events). Off by default:
    /// `wake` then comes once per step, at its end.
    void wake_when_computed(bool on) noexcept { wake_computed_ = on; }
    /// True between start_on_comm and the take_done_on_comm that returns its result.
    bool busy() const noexcept { return busy_; }

  private:
    void loop(std::stop_token stop);
    /// Rounds by time: the inner steps whose expected ends fall within `seconds` from `start`
    /// (at least one): each step's declared time, or the last round's measured seconds per
    /// inner step when that is longer.
    std::int64_t plan_round(double seconds, double start) const;

    proto::LocalWorker& worker_;
    DeclaredStepTime declared_;
    std::function<void()> wake_;
    std::mutex mutex_;
    std::condition_variable_any cv_;
    std::optional<std::int64_t> request_;
    double start_ = 0;
    std::span<const float> at_;
    std::optional<StepDone> done_;
    std::optional<GradientDone> computed_;
    std::atomic<bool> wake_computed_{false};
    bool busy_ = false;         // communication thread only
    double measured_step_ = 0;  // compute thread: the last round's seconds per inner step
    std::jthread thread_;
};

}  // namespace gossamer::peer
