// gossamer launch: the n peers of a topology as threads of this process over the in-process
// transport, one algorithm after another, with the cluster file's heterogeneity emulated
// (docs/cli.md, docs/peer.md). Processes over UCX come next.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "algorithms.hpp"
#include "args.hpp"
#include "cluster_options.hpp"
#include "commands.hpp"
#include "gossamer/core/blas.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/training_config.hpp"
#include "gossamer/peer/local.hpp"
#include "gossamer/sim/cluster.hpp"
#include "gossamer/sim/compute_model.hpp"
#include "gossamer/topology/topology_file.hpp"
#include "progress.hpp"

namespace gossamer::cli {
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

int run_launch(const std::vector<std::string>& args) {
    ArgParser p(
        "gossamer launch", "--topology T --config TRAIN [options]",
        "Runs the n peers of the topology (n from the topology) for real, as threads of this "
        "process over the in-process transport (processes over UCX come next), one algorithm "
        "after another. With a cluster file each peer's steps are padded to the cluster's step "
        "times (factor, jitter, slow periods), its sends are paced by the cluster's links and it "
        "stops at its failure time; without one peers run at their natural speed. The table "
        "shows the wall-clock time, the test accuracy and loss of the exact average of the "
        "surviving peers' models, the bytes sent per peer and the share of time peers sat "
        "idle. Writes OUT/<algorithm>/peer<r>.jsonl (docs/peer.md, Metrics) and "
        "OUT/<algorithm>/result.json.",
        {{"topology", "FILE", "the topology file"},
         {"config", "FILE", "the training config"},
         {"cluster", "FILE", "the cluster file (docs/cluster-format.md); default: natural speed"},
         {"algorithms", "LIST", "comma-separated (default allreduce,dpsgd,async)"},
         {"epochs", "N", "passes of each peer over its shard (default: training.epochs)"},
         {"out", "DIR", "output folder (default out/launch)"},
         {"json", "", "print the summary as JSON"}},
        0);
    auto a = p.parse(args);
    if (a.help) return std::cout << p.help(), 0;
    for (const char* req : {"topology", "config"})
        if (!a.value(req))
            throw UsageError(fmt::format("gossamer launch: --{} FILE is required", req));

    // Everything is loaded and checked before anything runs or is written.
    auto topo = topology::load_topology(*a.value("topology"));
    const int n = topo.n();
    std::shared_ptr<const sim::Cluster> cluster;
    if (a.value("cluster"))
        cluster = std::make_shared<const sim::Cluster>(sim::load_cluster(*a.value("cluster"), n));
    const auto algorithms =
        parse_algorithms(a.value("algorithms").value_or("allreduce,dpsgd,async"));
    const std::filesystem::path out(a.value("out").value_or("out/launch"));
    const auto cfg = optim::load_training_config(*a.value("config"));
    const int epochs = static_cast<int>(a.integer("epochs", cfg.epochs, 1, 100000));
    Progress progress(30.0);
    set_blas_threads(1);  // n peers share this machine's cores
    progress(fmt::format("loading {}", cfg.data.name));
    const auto data = optim::load_training_data(cfg);
    check_algorithms(algorithms, &cfg, &data.train, topo.schedule, 0);
    // The smallest shard (the workers check each again): a batch that cannot fit fails here,
    // before OUT is written.
    optim::check_batch_size(cfg, static_cast<std::int64_t>(data.train.size()) / n);
    std::shared_ptr<const sim::ComputeModel> compute;
    if (cluster) compute = std::make_shared<const sim::ComputeModel>(*cluster, cfg.seed);

    // About the steps of all peers together (shards may differ by a batch): the progress line's.
    const std::int64_t total_steps = static_cast<std::int64_t>(data.train.size()) / n /
                                     std::max<std::int64_t>(cfg.batch_size, 1) * epochs * n;

    json::Json summary = {
        {"topology", *a.value("topology")},
        {"cluster", a.value("cluster") ? json::Json(*a.value("cluster")) : json::Json(nullptr)},
        {"n", n},
        {"transport", "inproc"},
        {"algorithms", json::Json::array()}};
    std::string table =
        fmt::format("{:<10} {:>10} {:>15} {:>12} {:>12} {:>8} {:>8}\n", "algorithm", "time [s]",
                    "final acc [%]", "final loss", "MB sent/peer", "idle", "failed");
    int status = 0;
    for (const auto& algo : algorithms) {
        const auto dir = out / algo;
        std::filesystem::create_directories(dir);
        const auto options = cfg.algorithm_options(algo);
        peer::LocalTraining job;
        job.algorithm = algo;
        job.algorithm_options = options ? &*options : nullptr;
        job.topology = topo.schedule;
        job.config = &cfg;
        job.train = &data.train;
        job.test = &data.test;
        job.epochs = epochs;
        std::atomic<std::int64_t> steps_done{0};
        std::atomic<double> last_loss{std::nan("")};
        job.options = [&](int rank) {
            auto o = options_for(rank, cluster, compute,
                                 (dir / fmt::format("peer{}.jsonl", rank)).string());
            o.on_step = [&](const peer::StepRecord& s) {
                steps_done.fetch_add(1, std::memory_order_relaxed);
                last_loss.store(s.loss, std::memory_order_relaxed);
            };
            return o;
        };
        progress(fmt::format("{}: {} peers as threads", algo, n), true);
        const auto t0 = std::chrono::steady_clock::now();
        std::optional<peer::LocalTrainingResult> res;
        {
            Ticker ticker([&] {
                const double s =
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                progress(fmt::format("{}: {} peers, {}/~{} steps, loss {:.4f}, {:.1f} s", algo, n,
                                     steps_done.load(std::memory_order_relaxed), total_steps,
                                     last_loss.load(std::memory_order_relaxed), s));
            });
            res = peer::run_local_training(job);
        }
        const double wall =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

        double bytes = 0, idle = 0;
        int finished = 0, failed = 0;
        json::Json peers = json::Json::array();
        for (std::size_t r = 0; r < res->peers.size(); ++r) {
            const auto& o = res->peers[r];
            json::Json rec = {{"rank", r}, {"seconds", o.seconds}};
            if (o.result) {
                const auto& d = *o.result;
                bytes += static_cast<double>(d.stats.bytes_sent);
                if (d.end_time > 0) idle += d.idle / d.end_time;
                ++finished;
                if (d.failed) ++failed;
                rec["steps"] = d.steps;
                rec["end_time"] = d.end_time;
                rec["idle_share"] = d.end_time > 0 ? d.idle / d.end_time : 0.0;
                rec["bytes_sent"] = d.stats.bytes_sent;
                rec["failed"] = d.failed;
            } else {
                rec["error"] = o.error;
                if (o.failed_rank) {
                    rec["failed_rank"] = *o.failed_rank;
                    std::cerr << fmt::format("{}: rank {}: {}\n", algo, r, o.error);
                } else {
                    std::cerr << fmt::format("{}: rank {} stopped: {}\n", algo, r, o.error);
                }
                status = 1;  // a peer the algorithm did not survive
            }
            peers.push_back(rec);
        }
        const double mb = bytes / n / 1e6;
        const double idle_share = finished > 0 ? idle / finished : 0.0;
        json::Json row = {
            {"algorithm", algo},
            {"wall_seconds", wall},
            {"final_accuracy", res->accuracy ? json::Json(*res->accuracy) : json::Json(nullptr)},
            {"final_loss", res->loss ? json::Json(*res->loss) : json::Json(nullptr)},
            {"mb_sent_per_peer", mb},
            {"idle_share", idle_share},
            {"failed_peers", failed},
            {"peers", peers}};
        {
            std::ofstream f(dir / "result.json");
            f << row.dump(2) << "\n";
            if (!f) throw Error(fmt::format("cannot write {}", (dir / "result.json").string()));
        }
        row.erase("peers");
        summary["algorithms"].push_back(row);
        table += fmt::format("{:<10} {:>10.2f} {:>15} {:>12} {:>12.2f} {:>8} {:>8}\n", algo, wall,
                             res->accuracy ? fmt::format("{:.2f}", 100 * *res->accuracy) : "-",
                             res->loss ? fmt::format("{:.4f}", *res->loss) : "-", mb,
                             fmt::format("{:.1f}%", 100 * idle_share), failed);
        progress(fmt::format("{}: done in {:.1f} s", algo, wall), true);
    }
    progress.done();
    if (a.flag("json"))
        std::cout << summary.dump(2) << "\n";
    else
        std::cout << table << fmt::format("metrics: {}/<algorithm>/peer<r>.jsonl\n", out.string());
    return status;
}

}  // namespace gossamer::cli
