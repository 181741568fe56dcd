// The evaluation points of gossamer peer (gossamer/peer/evaluator.hpp, docs/modules/peer.md).
#include "gossamer/peer/evaluator.hpp"

#include <fmt/format.h>
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <utility>

#include "gossamer/core/error.hpp"
#include "gossamer/core/file_io.hpp"
#include "gossamer/core/text_metrics.hpp"

namespace gossamer::peer {

PeerEvaluator::PeerEvaluator(Model& model, Dataset test, int batch, int rank, double interval,
                             std::function<void()> wake)
    : model_(model),
      test_(std::move(test)),
      batch_(batch),
      rank_(rank),
      interval_(interval),
      wake_(std::move(wake)),
      thread_([this](std::stop_token stop) { loop(stop); }) {}

PeerEvaluator::~PeerEvaluator() {
    thread_.request_stop();
    cv_.notify_all();
}

void PeerEvaluator::at_step(double time, const std::function<void(std::vector<float>&)>& copy) {
    const auto tick = static_cast<std::int64_t>(std::floor(time / interval_));
    if (tick <= last_tick_) return;
    last_tick_ = tick;
    Job job{tick, time, {}};
    copy(job.params);
    {
        std::lock_guard lock(mutex_);
        queued_ = std::move(job);  // a tick queued but not yet begun is replaced
    }
    cv_.notify_all();
}

std::vector<json::Json> PeerEvaluator::take() {
    std::lock_guard lock(mutex_);
    return std::exchange(done_, {});
}

std::vector<json::Json> PeerEvaluator::finish(double timeout_s) {
    {
        std::unique_lock lock(mutex_);
        cv_.wait_for(lock, std::chrono::duration<double>(timeout_s),
                     [&] { return !queued_ && !running_; });
    }
    thread_.request_stop();
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    return take();
}

void PeerEvaluator::loop(std::stop_token stop) {
    // A measurement must not take the cores from what it measures: the evaluator runs at the
    // lowest priority of its process (nice 19 for this thread alone, Linux's per-thread nice),
    // so where the peers of a lab share the cores their steps keep theirs and the evaluations
    // take what is left (fewer ticks are evaluated, each still of its tick's model). The name
    // lets a sampler tell its CPU time from training's (scripts/lab/campaign.py).
    pthread_setname_np(pthread_self(), "gossamer-eval");
    errno = 0;
    const int now = getpriority(PRIO_PROCESS, static_cast<id_t>(gettid()));
    if (errno == 0 && now < 19) setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 19);
    for (;;) {
        Job job;
        {
            std::unique_lock lock(mutex_);
            cv_.wait(lock, stop, [&] { return queued_.has_value(); });
            if (!queued_) return;  // stopped
            job = std::move(*queued_);
            queued_.reset();
            running_ = true;
        }
        json::Json line = {{"rank", rank_},
                           {"eval", job.tick},
                           {"time", static_cast<double>(job.tick) * interval_},
                           {"at", job.at}};
        try {
            const EvalResult e = model_.evaluate(job.params, test_, batch_);
            line["accuracy"] = e.accuracy ? json::Json(*e.accuracy) : json::Json(nullptr);
            line["loss"] = e.loss;
            if (text_metrics::is_text(test_)) line["bpc"] = text_metrics::bits_per_char(e.loss);
        } catch (const std::exception& ex) {  // a line that says so; training goes on
            line["error"] = ex.what();
        }
        {
            std::lock_guard lock(mutex_);
            done_.push_back(std::move(line));
            running_ = false;
        }
        cv_.notify_all();
        if (wake_) wake_();
    }
}

void append_metrics_lines(const std::string& path, const std::vector<json::Json>& lines) {
    if (path.empty() || lines.empty()) return;
    std::string text;
    for (const auto& l : lines) text += l.dump() + "\n";
    // Whole lines or none: a full disk cuts the file back to where it was (an IoError, exit 2).
    std::error_code ec;
    const auto before = std::filesystem::file_size(path, ec);
    std::ofstream f(path, std::ios::app);
    f << text;
    f.flush();
    if (!f) {
        const int err = errno;
        f.close();
        if (!ec) std::filesystem::resize_file(path, before, ec);
        throw IoError(fmt::format("{}: cannot write metrics: {}", path, std::strerror(err)));
    }
}

}  // namespace gossamer::peer
