#pragma once
/// The evaluation points of `gossamer peer` (docs/modules/peer.md, "Evaluation points"): every
/// `interval` seconds of the driver's clock the peer's own current model is evaluated on a fixed
/// subset of the test set. The communication thread copies the model at the first step boundary
/// at or after each tick (the protocol's parameters are touched only there); a thread of its own
/// evaluates the copy, so neither the compute thread's steps nor the communication loop wait.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "gossamer/core/dataset.hpp"
#include "gossamer/core/json.hpp"
#include "gossamer/core/model.hpp"

namespace gossamer::peer {

/// Appends `lines` to the metrics file at `path` (the evaluations that finished after the driver
/// closed it); Error when it cannot be written. Nothing to do for an empty path.
void append_metrics_lines(const std::string& path, const std::vector<json::Json>& lines);

class PeerEvaluator {
  public:
    /// `model` is used by the evaluator's thread alone until finish() returned; `wake` is called
    /// (from that thread) after each evaluation so the driver writes its line soon.
    PeerEvaluator(Model& model, Dataset test, int batch, int rank, double interval,
                  std::function<void()> wake);
    ~PeerEvaluator();
    PeerEvaluator(const PeerEvaluator&) = delete;
    PeerEvaluator& operator=(const PeerEvaluator&) = delete;

    /// Communication thread, at a step boundary at `time` seconds: when a tick k*interval has
    /// passed since the last evaluation point, `copy` fills the model to evaluate and tick k (the
    /// latest one passed) is queued. A tick still queued when the next one comes is replaced.
    void at_step(double time, const std::function<void(std::vector<float>&)>& copy);
    /// The finished evaluations' lines {"rank","eval","time","at","accuracy","loss"}.
    std::vector<json::Json> take();
    /// Waits (at most `timeout_s`) for the queued and running evaluation, stops the thread and
    /// returns the lines take() has not returned.
    std::vector<json::Json> finish(double timeout_s = 10);

  private:
    struct Job {
        std::int64_t tick = 0;
        double at = 0;
        std::vector<float> params;
    };
    void loop(std::stop_token stop);

    Model& model_;
    const Dataset test_;
    const int batch_, rank_;
    const double interval_;
    std::function<void()> wake_;
    std::int64_t last_tick_ = -1;  // communication thread only
    std::mutex mutex_;
    std::condition_variable_any cv_;
    std::optional<Job> queued_;
    bool running_ = false;
    std::vector<json::Json> done_;
    std::jthread thread_;
};

}  // namespace gossamer::peer
