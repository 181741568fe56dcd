// gossamer launch's run: every algorithm in turn, its result files and the job's summary
// (docs/operations/cli.md).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <thread>

#include "gossamer/core/cluster.hpp"
#include "gossamer/core/file_io.hpp"
#include "gossamer/core/output_dir.hpp"
#include "gossamer/lab/from_cluster.hpp"
#include "gossamer/lab/lab.hpp"
#include "gossamer/launch/child_process.hpp"
#include "gossamer/launch/launch_job.hpp"

namespace gossamer::launch {
namespace {

namespace fs = std::filesystem;

// One lab for every algorithm (--hosts netns); its holder removes it however this process ends.
std::optional<lab::Lab> open_lab(const LaunchJob& job) {
    if (job.hosts != "netns") return std::nullopt;
    const int n = job.topology.n();
    lab::LabSpec spec;
    if (job.cluster)
        spec = lab::spec_from_cluster(*job.cluster);
    else
        spec.peers.assign(static_cast<std::size_t>(n), {});
    std::optional<lab::Lab> the_lab(lab::Lab::create(spec));
    std::cerr << fmt::format("lab {}: {} peers as hosts in {}, links shaped by the kernel{}\n",
                             the_lab->job(), n, lab::subnet(the_lab->slot()),
                             job.cluster ? " from the cluster file" : " (no caps)");
    if (job.cluster && lab::cluster_has_latency(*job.cluster))
        std::cerr << "lab: no netem in this kernel: the peers emulate the cluster file's "
                     "latencies\n";
    return the_lab;
}

// OUT/<algorithm>/ made ready for its peers; resuming, the stopped run's metrics are kept
// aside: the resumed peers write theirs afresh, and the launcher follows those from their
// first byte.
void prepare_algorithm_dir(const LaunchJob& job, const std::string& algo, Progress& progress) {
    const OutputOrigin origin{"", "--out"};
    if (job.resume.empty()) {
        prepare_output_dir(job.out / algo, "gossamer launch", origin, OutputUse::replace_for_peers);
        return;
    }
    prepare_output_dir(job.out / algo, "gossamer launch", origin, OutputUse::share);
    progress(fmt::format("{}: resuming at step {} from {}", algo, job.resume.at(algo).step,
                         (job.out / algo).string()),
             true);
    for (int r = 0; r < job.topology.n(); ++r) {
        const auto metrics = job.out / algo / fmt::format("peer{}.jsonl", r);
        std::error_code ec;
        if (fs::exists(metrics, ec))
            fs::rename(metrics, job.out / algo / fmt::format("peer{}.stopped.jsonl", r));
    }
}

}  // namespace

LaunchOutcome run_job(const LaunchJob& job, const optim::TrainingData* data, Progress& progress) {
    LaunchOutcome outcome;
    auto& summary = outcome.summary;
    summary = {{"topology", job.topology_path},
               {"cluster", job.cluster_path ? json::Json(*job.cluster_path) : json::Json(nullptr)},
               {"n", job.topology.n()},
               {"transport", job.inproc ? "inproc" : "ucx"},
               {"algorithms", json::Json::array()}};
    if (job.target) summary[job.target_is_loss ? "target_loss" : "target"] = *job.target;
    std::optional<InterruptGuard> interrupts;  // Ctrl-C stops the peer processes first
    if (!job.inproc) interrupts.emplace();
    // OUT is made ready once every input is checked: an earlier launch's output is replaced, a
    // folder Gossamer did not write is refused; each OUT/<algorithm>/ is marked for its peers.
    const OutputOrigin origin{"", "--out"};
    if (!job.resume.empty())  // OUT is kept: its checkpoints are read
        prepare_output_dir(job.out, "gossamer launch", origin, OutputUse::keep);
    else if (auto notice = prepare_output_dir(job.out, "gossamer launch", origin))
        std::cerr << "note: " << *notice << "\n";
    const auto the_lab = open_lab(job);
    LaunchJob with_lab = job;  // the same job, its peers in the lab
    if (the_lab) with_lab.lab = &*the_lab;
    summary["hosts"] = job.hosts;
    for (const auto& algo : job.algorithms) {
        prepare_algorithm_dir(job, algo, progress);
        const LaunchRow row = job.inproc ? launch_threads(with_lab, *data, algo, progress)
                                         : launch_processes(with_lab, algo, progress);
        if (!row.ok) outcome.status = std::max(outcome.status, 1);
        if (row.diverged > 0)
            outcome.status = 3;  // a peer's training diverged (docs/operations/reliability.md)
        if (const auto merged = merge_peer_traces(job, algo))
            progress(fmt::format("{}: trace {}", algo, *merged), true);
        auto record = to_json(row);
        write_file_atomically((job.out / algo / "result.json").string(), record.dump(2) + "\n",
                              "result");
        record.erase("peers");
        summary["algorithms"].push_back(record);
        progress(fmt::format("{}: {} in {:.1f} s", algo, row.ok ? "done" : "FAILED", row.wall),
                 true);
        outcome.rows.push_back(row);
    }
    progress.done();
    write_file_atomically((job.out / "result.json").string(), summary.dump(2) + "\n", "result");
    return outcome;
}

void write_plots(const fs::path& out, std::optional<double> target, const std::string& source) {
    const char* env = std::getenv("GOSSAMER_PLOT_SCRIPT");
    const fs::path script = env ? fs::path(env) : fs::path(source);
    const fs::path python = "/usr/bin/python3";
    const auto log = out / "plot.log";
    if (!fs::exists(python) || !fs::exists(script)) {
        std::cerr << fmt::format("warning: no plots: {} not found\n",
                                 fs::exists(python) ? script.string() : python.string());
        return;
    }
    Children plot;
    std::vector<std::string> argv = {python.string(), script.string(), out.string()};
    if (target) argv.insert(argv.end(), {"--target", fmt::format("{}", *target)});
    plot.start(argv, {}, log);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (!plot.running().empty() && std::chrono::steady_clock::now() < deadline &&
           !InterruptGuard::received()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        plot.poll();
    }
    plot.kill_all(1.0);
    if (!plot.status(0) || !plot.status(0)->ok()) {
        const auto tail = last_lines(log, 1);
        std::cerr << fmt::format("warning: no plots ({}): {}\n", log.string(),
                                 tail.empty() ? "plot.py did not finish" : tail.back());
    }
}

}  // namespace gossamer::launch
