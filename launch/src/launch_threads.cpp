// gossamer launch --inproc: the n peers of a topology as threads of this process over the
// in-process transport, with the cluster file's heterogeneity emulated (docs/operations/cli.md).
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <functional>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>

#include "gossamer/core/cluster.hpp"
#include "gossamer/core/compute_model.hpp"
#include "gossamer/launch/launch.hpp"
#include "gossamer/peer/cluster_options.hpp"
#include "gossamer/peer/evaluator.hpp"
#include "gossamer/peer/local.hpp"
#include "live.hpp"
#include "metrics_follow.hpp"

namespace gossamer::launch {
namespace {

/// Calls `tick` every 0.5 s on its own thread until destroyed: the progress line while the
/// peers run (run_local_training blocks this thread).
class Ticker {
  public:
    explicit Ticker(std::function<void()> tick)
        : thread_([this, tick = std::move(tick)](std::stop_token stop) {
              std::unique_lock lock(mutex_);
              while (!stop.stop_requested()) {
                  cv_.wait_for(lock, stop, std::chrono::milliseconds(500),
                               [&] { return stop.stop_requested(); });
                  if (!stop.stop_requested()) tick();
              }
          }) {}

  private:
    std::mutex mutex_;
    std::condition_variable_any cv_;
    std::jthread thread_;  // last: stopped and joined first
};

}  // namespace

LaunchRow launch_threads(const LaunchJob& job, const optim::TrainingData& data,
                         const std::string& algo, Progress& progress) {
    const int n = job.topology.n();
    const auto dir = job.out / algo;
    std::shared_ptr<const ComputeModel> compute;
    if (job.cluster) compute = std::make_shared<const ComputeModel>(*job.cluster, job.config->seed);
    const auto options = job.config->algorithm_options(algo);
    peer::LocalTraining lt;
    lt.algorithm = algo;
    lt.algorithm_options = options ? &*options : nullptr;
    lt.topology = job.topology.schedule;
    lt.config = job.config.get();
    lt.train = &data.train;
    lt.test = &data.test;
    lt.epochs = job.epochs;
    lt.cluster = job.cluster;
    std::atomic<std::int64_t> steps_done{0};
    std::atomic<double> last_loss{std::nan("")};
    const auto path_of = [&](int r) { return (dir / fmt::format("peer{}.jsonl", r)).string(); };
    lt.options = [&](int rank) {
        auto o = peer::options_for(rank, job.cluster, compute, path_of(rank));
        o.on_step = [&](const peer::StepRecord& s) {
            steps_done.fetch_add(1, std::memory_order_relaxed);
            last_loss.store(s.loss, std::memory_order_relaxed);
        };
        return o;
    };
    // Evaluation points, as gossamer peer writes them: each peer's own model every
    // --eval-interval s on an evaluator thread of its own (gossamer/peer/evaluator.hpp).
    const Dataset subset =
        job.eval_samples > 0 ? first_samples(data.test, job.eval_samples) : Dataset{};
    std::vector<std::unique_ptr<Model>> models;
    std::vector<std::optional<peer::PeerEvaluator>> evals(static_cast<std::size_t>(n));
    if (job.eval_samples > 0)
        for (int r = 0; r < n; ++r) models.push_back(optim::build_model(*job.config, data.train));
    lt.attach = [&](int r, const proto::Protocol& protocol, peer::DriverOptions& o) {
        if (job.trace) {
            o.trace_path = peer_trace_path(job, algo, r).string();
            o.trace_limit = job.trace_limit;
            o.clock_offset = bootstrap::ClockOffset{};  // threads of one process: one clock
        }
        if (job.eval_samples <= 0) return;
        const auto i = static_cast<std::size_t>(r);
        auto& ev = evals[i].emplace(*models[i], subset, job.config->eval_batch, r,
                                    job.eval_interval, [] {});
        o.extra_metrics = [&ev] { return ev.take(); };
        o.on_step = [&ev, &protocol, size = models[i]->parameter_count(),
                     then = std::move(o.on_step)](const peer::StepRecord& s) {
            if (then) then(s);
            ev.at_step(s.time, [&](std::vector<float>& into) {
                into.resize(size);
                protocol.current_model(into);
            });
        };
    };
    progress(fmt::format("{}: {} peers as threads", algo, n), true);
    const auto t0 = std::chrono::steady_clock::now();
    std::optional<peer::LocalTrainingResult> res;
    // The live view follows the peers' metrics files as for peer processes (the ticker's
    // thread only, until it is joined).
    std::vector<Follower> live_follow(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) live_follow[static_cast<std::size_t>(r)].path = path_of(r);
    LiveTable live;
    {
        Ticker ticker([&] {
            const double s =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            for (auto& f : live_follow) f.read();
            const std::string line = fmt::format(
                "{}: {} peers, {}/~{} steps, loss {:.4f}, {}, {:.1f} s", algo, n,
                steps_done.load(std::memory_order_relaxed), job.total_steps,
                last_loss.load(std::memory_order_relaxed), live_fragment(live_follow), s);
            if (!job.live) return progress(line);
            if (live.tty()) progress.done();  // the table takes the terminal's last lines
            auto lines = live_table(live_follow);
            lines.insert(lines.begin(), line);
            live.show(lines, s);
        });
        res = peer::run_local_training(lt);
    }
    std::vector<Follower> follow;
    for (int r = 0; r < n; ++r) {
        auto& ev = evals[static_cast<std::size_t>(r)];
        if (ev) peer::append_metrics_lines(path_of(r), ev->finish());
        follow.emplace_back().path = path_of(r);
        follow.back().read();
    }
    LaunchRow row;
    row.algorithm = algo;
    row.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    progress.done();
    if (job.live) {  // the table as the peers left it
        auto lines = live_table(follow);
        lines.insert(lines.begin(),
                     fmt::format("{}: done, {}, {:.1f} s", algo, live_fragment(follow), row.wall));
        live.show(lines, row.wall, true);
    }
    row.accuracy = res->accuracy;
    if (job.target) row.time_to_target = time_to_target(follow, *job.target, job.target_is_loss);
    row.text = job.text;
    row.loss = res->loss;
    double bytes = 0, idle = 0;
    int finished = 0;
    for (std::size_t r = 0; r < res->peers.size(); ++r) {
        const auto& o = res->peers[r];
        json::Json rec = {{"rank", r}, {"seconds", o.seconds}};
        if (o.result) {
            const auto& d = *o.result;
            bytes += static_cast<double>(d.stats.bytes_sent);
            if (d.end_time > 0) idle += d.idle / d.end_time;
            ++finished;
            if (d.failed) ++row.failed;
            rec["steps"] = d.steps;
            rec["end_time"] = d.end_time;
            row.train = std::max(row.train, d.end_time);
            rec["idle_share"] = d.end_time > 0 ? d.idle / d.end_time : 0.0;
            rec["bytes_sent"] = d.stats.bytes_sent;
            rec["failed"] = d.failed;
        } else {
            rec["error"] = o.error;
            if (o.diverged) {  // lost as a crash is; the others carried on without it
                ++row.failed;
                ++row.diverged;
                rec["lost"] = "diverged";
                std::cerr << fmt::format("{}: rank {} diverged: {}; lost peer\n", algo, r, o.error);
                row.peers.push_back(rec);
                continue;
            }
            if (o.failed_rank) {
                rec["failed_rank"] = *o.failed_rank;
                std::cerr << fmt::format("{}: rank {}: {}\n", algo, r, o.error);
            } else {
                std::cerr << fmt::format("{}: rank {} stopped: {}\n", algo, r, o.error);
            }
            row.ok = false;  // a peer the algorithm did not survive
        }
        row.peers.push_back(rec);
    }
    row.mb_per_peer = bytes / n / 1e6;
    row.idle_share = finished > 0 ? idle / finished : 0.0;
    return row;
}

}  // namespace gossamer::launch
