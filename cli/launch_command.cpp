// gossamer launch: the n peers of a topology for real, one algorithm after another: as
// `gossamer peer` processes over UCX (default) or as threads over the in-process transport
// (--inproc), with the cluster file's heterogeneity emulated (docs/operations/cli.md).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "algorithms.hpp"
#include "args.hpp"
#include "commands.hpp"
#include "gossamer/core/blas.hpp"
#include "gossamer/core/checkpoint_file.hpp"
#include "gossamer/core/cluster.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/core/file_io.hpp"
#include "gossamer/core/output_dir.hpp"
#include "gossamer/core/progress.hpp"
#include "gossamer/core/trace.hpp"
#include "gossamer/lab/from_cluster.hpp"
#include "gossamer/lab/lab.hpp"
#include "gossamer/lab/system.hpp"
#include "gossamer/launch/child_process.hpp"
#include "gossamer/launch/launch.hpp"
#include "gossamer/launch/local_ports.hpp"
#include "gossamer/optimizers/protocol/registry.hpp"
#include "gossamer/peer/checkpoints.hpp"

namespace gossamer::cli {
namespace {

namespace fs = std::filesystem;

/// Runs scripts/plot.py on OUT (GOSSAMER_PLOT_SCRIPT overrides where it is); a missing Python or
/// matplotlib is one warning line, never a failure of the launch.
void write_plots(const fs::path& out, std::optional<double> target) {
    const char* env = std::getenv("GOSSAMER_PLOT_SCRIPT");
    const fs::path script = env ? fs::path(env) : fs::path(GOSSAMER_SOURCE_DIR) / "scripts/plot.py";
    const fs::path python = "/usr/bin/python3";
    const auto log = out / "plot.log";
    if (!fs::exists(python) || !fs::exists(script)) {
        std::cerr << fmt::format("warning: no plots: {} not found\n",
                                 fs::exists(python) ? script.string() : python.string());
        return;
    }
    launch::Children plot;
    std::vector<std::string> argv = {python.string(), script.string(), out.string()};
    if (target) argv.insert(argv.end(), {"--target", fmt::format("{}", *target)});
    plot.start(argv, {}, log);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (!plot.running().empty() && std::chrono::steady_clock::now() < deadline &&
           !launch::InterruptGuard::received()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        plot.poll();
    }
    plot.kill_all(1.0);
    if (!plot.status(0) || !plot.status(0)->ok()) {
        const auto tail = launch::last_lines(log, 1);
        std::cerr << fmt::format("warning: no plots ({}): {}\n", log.string(),
                                 tail.empty() ? "plot.py did not finish" : tail.back());
    }
}

// The time-to-target column (empty without a target): "—" when never reached.
std::string target_header(std::optional<double> target) {
    return target ? fmt::format("time to {:.1f}% ", 100 * *target) : "";
}
std::string target_cell(std::optional<double> target, std::optional<double> time) {
    if (!target) return "";
    return time ? fmt::format("{:.2f} ", *time) : "— ";
}

/// `ddp` mirrors the built-in softmax and mlp with SGD (bench/ddp_ref.py): anything else is
/// refused before the first algorithm runs, rather than by each script peer.
void check_ddp_config(const std::string& path, const optim::TrainingConfig& cfg) {
    std::ifstream in(path);
    const auto doc = json::Json::parse(in, nullptr, false, true);
    const auto model = doc.is_object() && doc.contains("model") && doc["model"].is_object()
                           ? doc["model"].value("name", std::string())
                           : std::string();
    if (model != "softmax" && model != "mlp")
        throw UsageError(fmt::format(
            "{}: model.name: ddp (bench/ddp_ref.py) has torch twins of softmax and mlp, not "
            "\"{}\"; leave ddp out of --algorithms or use one of those models",
            path, model));
    if (cfg.optimizer.kind != optim::OptimizerKind::sgd)
        throw UsageError(fmt::format(
            "{}: optimizer.name: ddp mirrors sgd only (torch.optim.SGD is its rule); leave ddp "
            "out of --algorithms or use sgd",
            path));
    if (doc.is_object() && doc.contains("multirate"))
        throw UsageError(
            fmt::format("{}: multirate: ddp trains every parameter at every step; leave ddp out of "
                        "--algorithms or remove multirate",
                        path));
}

}  // namespace

int run_launch(const std::vector<std::string>& args) {
    ArgParser p(
        "gossamer launch", "--topology T --config TRAIN [options]",
        "Runs the n peers of the topology (n from the topology) for real on this machine, one "
        "algorithm after another: each peer a `gossamer peer` process over UCX, or with "
        "--inproc threads of this process over the in-process transport. With a cluster file "
        "each peer's steps are padded to the cluster's step times (factor, jitter, slow "
        "periods), its sends are paced by the cluster's links and it stops at its failure time; "
        "ranks with a join_at start then, and a rank with a rejoin_at starts again then, each "
        "with --join, every peer on the job's clock (docs/operations/elastic.md). "
        "Every peer evaluates its own model on the first 2000 test samples every "
        "--eval-interval seconds; the table's first column is the first such tick at which the "
        "mean accuracy of the peers reached --target (processes only). "
        "The table shows the longest peer's training time, the wall-clock time with start-up, the "
        "test accuracy and loss of the exact average "
        "of the surviving peers' models, the MB sent per peer and the share of time peers sat "
        "idle. Writes OUT/<algorithm>/peer<r>.jsonl and .log, OUT/<algorithm>/result.json, "
        "OUT/result.json and the plots of scripts/plot.py. Exit status: 0 when every algorithm "
        "finished or survived its lost peers, 1 when one did not (the failed peer is named with "
        "its exit status and the last lines of its log), 2 for bad input, 3 when a peer's loss or "
        "model became NaN or infinite (the table counts it lost and diverged)." +
            algorithms_help(),
        {{"topology", "FILE", "the topology file (its peers must be on this machine)"},
         {"config", "FILE", "the training config"},
         {"cluster", "FILE",
          "the cluster file (docs/formats/cluster-format.md); default: natural speed"},
         {"algorithms", "LIST",
          fmt::format("comma-separated (default {}); ddp: torch DDP over gloo on the same job "
                      "(bench/ddp_ref.py, docs/results/benchmarks.md)",
                      proto::default_algorithms(proto::default_for_launch))},
         {"epochs", "N", "passes of each peer over its shard (default: training.epochs)"},
         {"threads-per-peer", "N", "BLAS threads of each peer (default cores / n, >= 1)"},
         {"target", "ACC",
          "target accuracy for the time-to-target column (default: "
          "training.target_accuracy)"},
         {"eval-interval", "S", "seconds between the peers' evaluation points (default 2)"},
         {"eval-samples", "N",
          "the first N test samples each evaluation uses (default 2000, as sim's per-peer "
          "accuracies; the whole test set for a like-for-like comparison with sim's average)"},
         {"timeout", "SECONDS", "stop an algorithm's peers after this long (default 3600)"},
         {"out", "DIR", "output folder (default out/launch)"},
         {"checkpoint-every", "N",
          "each peer writes its checkpoints every N steps (default: the config's "
          "output.checkpoint_every; peer processes only; docs/operations/checkpoint.md)"},
         {"resume", "OUT",
          "restart the stopped launch whose output folder is OUT: each algorithm's peers from "
          "the newest checkpoint step all of them hold in OUT/<algorithm>/ (written with the "
          "config's output.checkpoint_every; docs/operations/checkpoint.md); peer processes only"},
         {"inproc", "", "peers as threads of this process over the in-process transport"},
         {"hosts", "local|netns",
          "local (default): peer processes on this machine's addresses; netns: each peer a host "
          "of a network-namespace lab, its links shaped by the kernel from the cluster file "
          "(root; docs/operations/lab.md)"},
         {"script", "FILE",
          "each peer runs `python3 FILE` instead of gossamer peer: a Python training script "
          "that finds its rank, topology, algorithm, config and output folder with "
          "gossamer.launched() (docs/library/python.md); with --cluster it gets its step time to "
          "pad to "
          "(GOSSAMER_STEP_TIME)"},
         {"script-args", "ARGS", "arguments of every --script peer (split at spaces)"},
         {"no-plots", "", "do not run scripts/plot.py"},
         {"trace", "FILE",
          "record each peer's timeline and merge them into FILE (Chrome trace / Perfetto JSON, "
          "docs/formats/trace.md); several algorithms: FILE-<algorithm>.json each"},
         {"trace-limit", "MB",
          "bound on each peer's trace events (default 64); past it whole steps are sampled"},
         {"live", "",
          "show a per-peer table (steps, s/step, idle, whom each waits for most) while the "
          "peers run, redrawn in place on a terminal (plain lines every 5 s otherwise)"},
         {"json", "", "print the summary as JSON"}},
        0);
    auto a = p.parse(args);
    if (a.help) return std::cout << p.help(), 0;
    for (const char* req : {"topology", "config"})
        if (!a.value(req))
            throw UsageError(fmt::format("gossamer launch: --{} FILE is required", req));

    // Everything is loaded and checked before anything runs or is written.
    launch::LaunchJob job;
    job.topology_path = *a.value("topology");
    job.config_path = *a.value("config");
    job.cluster_path = a.value("cluster");
    job.topology = topology::load_topology(job.topology_path);
    const int n = job.topology.n();
    if (job.cluster_path)
        job.cluster = std::make_shared<const Cluster>(load_cluster(*job.cluster_path, n));
    const auto algorithms = parse_algorithms(
        a.value("algorithms").value_or(proto::default_algorithms(proto::default_for_launch)),
        {"ddp"});
    const bool with_ddp =
        std::find(algorithms.begin(), algorithms.end(), "ddp") != algorithms.end();
    job.out = a.value("out").value_or("out/launch");
    const auto cfg = optim::load_training_config(job.config_path);
    job.config = &cfg;
    if (with_ddp) check_ddp_config(job.config_path, cfg);
    job.epochs = static_cast<int>(a.integer("epochs", cfg.epochs, 1, 100000));
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    job.threads_per_peer =
        static_cast<int>(a.integer("threads-per-peer", std::max(1, cores / n), 1, 1024));
    job.timeout = a.number("timeout", 3600.0);
    if (job.timeout <= 0)
        throw UsageError(
            fmt::format("gossamer launch: --timeout {}: give seconds > 0", *a.value("timeout")));
    job.eval_interval = eval_interval_option(a);
    job.eval_samples = a.integer("eval-samples", 2000, 1, INT64_MAX);
    job.trace = a.value("trace");
    job.trace_limit = trace_limit_bytes(a);
    job.trace_per_algorithm = algorithms.size() > 1;
    job.live = a.flag("live");
    if (job.trace) trace::check_writable(*job.trace, "--trace");
    job.target = cfg.target_accuracy;
    if (a.value("target")) job.target = a.number("target", 0);
    if (job.target && !(*job.target > 0 && *job.target <= 1))
        throw UsageError(fmt::format("--target: {} is not an accuracy in (0, 1]", *job.target));
    const bool inproc = a.flag("inproc");
    const std::string hosts = a.value("hosts").value_or("local");
    if (hosts != "local" && hosts != "netns")
        throw UsageError(
            fmt::format("--hosts: \"{}\" is not a kind of host; use local or netns", hosts));
    const bool netns = hosts == "netns";
    if (with_ddp && inproc)
        throw UsageError(
            "--algorithms: ddp runs torch processes (bench/ddp_ref.py), not --inproc threads; "
            "leave out --inproc or ddp");
    if (with_ddp) {
        const char* env = std::getenv("GOSSAMER_DDP_SCRIPT");
        const fs::path ddp =
            env && *env ? fs::path(env) : fs::path(GOSSAMER_SOURCE_DIR) / "bench/ddp_ref.py";
        if (!fs::is_regular_file(ddp))
            throw UsageError(
                fmt::format("--algorithms: ddp needs its script {}, which is not a file; set "
                            "GOSSAMER_DDP_SCRIPT to bench/ddp_ref.py of the source tree",
                            ddp.string()));
        job.ddp_script = fs::absolute(ddp).string();
    }
    if (netns && (inproc || a.value("script")))
        throw UsageError(fmt::format("--hosts netns: the lab runs gossamer peer processes, not {}",
                                     inproc ? "--inproc threads" : "--script peers"));
    if (netns && n > lab::kMaxPeers)
        throw UsageError(fmt::format("--hosts netns: {} peers do not fit in one lab (at most {})",
                                     n, lab::kMaxPeers));
    if (netns)
        if (const auto missing = lab::missing_requirements(); !missing.empty())
            throw UsageError("--hosts netns: " + missing);
    if (const auto script = a.value("script")) {
        if (!fs::is_regular_file(*script))
            throw UsageError(fmt::format(
                "--script: {} is not a file; give the path of a Python training script", *script));
        if (inproc)
            throw UsageError(
                "--script: a script peer is a process of its own, not an --inproc thread; leave "
                "out --inproc");
        job.script = fs::absolute(*script).string();
        std::istringstream words(a.value("script-args").value_or(""));
        for (std::string w; words >> w;) job.script_args.push_back(w);
    } else if (a.value("script-args")) {
        throw UsageError("--script-args: it needs --script FILE");
    }
    if (a.value("checkpoint-every")) {
        if (inproc) throw UsageError("--checkpoint-every: peer processes only; leave out --inproc");
        job.checkpoint_every = a.integer("checkpoint-every", 0, 0, INT64_MAX);
    }
    // A cluster file with churn: algorithms that can follow it, and a launch that can.
    if (job.cluster && job.cluster->has_churn())
        check_elastic(algorithms, cfg, job.config_path, job.topology.schedule, *job.cluster_path);
    launch::check_churn(job, inproc, a.value("resume").has_value());
    if (const auto resume = a.value("resume")) {
        if (a.value("out") && fs::path(*a.value("out")) != fs::path(*resume))
            throw UsageError(
                "--resume: the job resumes into the folder it stopped in; leave out --out or give "
                "the same folder");
        if (inproc || job.script || with_ddp)
            throw UsageError(
                fmt::format("--resume: resumes gossamer peer processes, not {}; leave it out",
                            inproc       ? "--inproc threads"
                            : job.script ? "--script peers"
                                         : "ddp"));
        job.out = *resume;
        // Every algorithm's step before anything starts: a folder that cannot resume is one
        // line and exit 2 (each peer checks its own file again before it joins).
        for (const auto& algo : algorithms) {
            const auto step = peer::resume_step(job.out / algo, n, -1, std::nullopt, "--resume");
            const auto first =
                load_checkpoint_file(peer::checkpoint_path(job.out / algo, 0, step).string());
            job.resume[algo] = {step, first.header.job_id};
        }
    }
    if (!inproc && !netns) {
        std::set<std::string> hosts;
        for (const auto& peer : job.topology.peers) hosts.insert(peer.host);
        for (const auto& host : hosts)
            if (!launch::is_local_host(host))
                throw UsageError(fmt::format(
                    "{}: peers: host {} is not an address of this machine; gossamer launch "
                    "starts local peers (start remote ones with gossamer peer on each host)",
                    job.topology_path, host));
    }
    Progress progress(30.0);
    set_blas_threads(1);  // n peers share this machine's cores
    progress(fmt::format("loading {}", cfg.data.name));
    auto data = std::make_unique<optim::TrainingData>(optim::load_training_data(cfg));
    std::vector<std::string> protocols;  // ddp is no protocol of Gossamer's
    std::copy_if(algorithms.begin(), algorithms.end(), std::back_inserter(protocols),
                 [](const std::string& a) { return a != "ddp"; });
    check_algorithms(protocols, &cfg, &data->train, job.topology.schedule, 0);
    // The smallest shard (the workers check each again): a batch that cannot fit fails here,
    // before OUT is written.
    optim::check_batch_size(cfg, static_cast<std::int64_t>(data->train.size()) / n);
    // About the steps of all peers together (shards may differ by a batch): the progress line's.
    job.total_steps = static_cast<std::int64_t>(data->train.size()) / n /
                      std::max<std::int64_t>(cfg.batch_size, 1) * job.epochs * n;
    if (!inproc) data.reset();  // the peer processes load their own

    json::Json summary = {
        {"topology", job.topology_path},
        {"cluster", job.cluster_path ? json::Json(*job.cluster_path) : json::Json(nullptr)},
        {"n", n},
        {"transport", inproc ? "inproc" : "ucx"},
        {"algorithms", json::Json::array()}};
    if (job.target) summary["target"] = *job.target;
    std::string table = fmt::format("{:<10} {:>15}{:>9} {:>9} {:>15} {:>12} {:>12} {:>8} {:>6}\n",
                                    "algorithm", target_header(job.target), "time [s]", "wall [s]",
                                    "final acc [%]", "final loss", "MB sent/peer", "idle", "lost");
    int status = 0;
    std::optional<launch::InterruptGuard> interrupts;  // Ctrl-C stops the peer processes first
    if (!inproc) interrupts.emplace();
    // OUT is made ready once every input is checked: an earlier launch's output is replaced, a
    // folder Gossamer did not write is refused; each OUT/<algorithm>/ is marked for its peers.
    const OutputOrigin origin{"", "--out"};
    const bool resuming = !job.resume.empty();  // OUT is kept: its checkpoints are read
    if (resuming)
        prepare_output_dir(job.out, "gossamer launch", origin, OutputUse::keep);
    else if (auto notice = prepare_output_dir(job.out, "gossamer launch", origin))
        std::cerr << "note: " << *notice << "\n";
    // One lab for every algorithm; its holder removes it however this process ends.
    std::optional<lab::Lab> the_lab;
    if (netns) {
        lab::LabSpec spec;
        if (job.cluster)
            spec = lab::spec_from_cluster(*job.cluster);
        else
            spec.peers.assign(static_cast<std::size_t>(n), {});
        the_lab.emplace(lab::Lab::create(spec));
        job.lab = &*the_lab;
        std::cerr << fmt::format("lab {}: {} peers as hosts in {}, links shaped by the kernel{}\n",
                                 the_lab->job(), n, lab::subnet(the_lab->slot()),
                                 job.cluster ? " from the cluster file" : " (no caps)");
        if (job.cluster && lab::cluster_has_latency(*job.cluster))
            std::cerr << "lab: no netem in this kernel: the peers emulate the cluster file's "
                         "latencies\n";
    }
    summary["hosts"] = hosts;
    for (const auto& algo : algorithms) {
        if (resuming) {
            prepare_output_dir(job.out / algo, "gossamer launch", origin, OutputUse::share);
            progress(fmt::format("{}: resuming at step {} from {}", algo, job.resume[algo].step,
                                 (job.out / algo).string()),
                     true);
            // The stopped run's metrics stay, aside: the resumed peers write theirs afresh, and
            // the launcher follows those from their first byte.
            for (int r = 0; r < n; ++r) {
                const auto metrics = job.out / algo / fmt::format("peer{}.jsonl", r);
                std::error_code ec;
                if (fs::exists(metrics, ec))
                    fs::rename(metrics, job.out / algo / fmt::format("peer{}.stopped.jsonl", r));
            }
        } else {
            prepare_output_dir(job.out / algo, "gossamer launch", origin,
                               OutputUse::replace_for_peers);
        }
        launch::LaunchRow row;
        try {
            row = inproc ? launch::launch_threads(job, *data, algo, progress)
                         : launch::launch_processes(job, algo, progress);
        } catch (const launch::Interrupted& stop) {
            return 128 + stop.signal;
        }
        if (!row.ok) status = std::max(status, 1);
        if (row.diverged > 0)
            status = 3;  // a peer's training diverged (docs/operations/reliability.md)
        if (const auto merged = launch::merge_peer_traces(job, algo))
            progress(fmt::format("{}: trace {}", algo, *merged), true);
        auto record = launch::to_json(row);
        write_file_atomically((job.out / algo / "result.json").string(), record.dump(2) + "\n",
                              "result");
        record.erase("peers");
        summary["algorithms"].push_back(record);
        table +=
            fmt::format("{:<10} {:>15}{:>9.2f} {:>9.2f} {:>15} {:>12} {:>12.2f} {:>8} {:>6}\n",
                        algo, target_cell(job.target, row.time_to_target), row.train, row.wall,
                        row.accuracy ? fmt::format("{:.2f}", 100 * *row.accuracy) : "-",
                        row.loss ? fmt::format("{:.4f}", *row.loss) : "-", row.mb_per_peer,
                        fmt::format("{:.1f}%", 100 * row.idle_share),
                        row.diverged ? fmt::format("{} ({} diverged)", row.failed, row.diverged)
                                     : fmt::format("{}", row.failed));
        progress(fmt::format("{}: {} in {:.1f} s", algo, row.ok ? "done" : "FAILED", row.wall),
                 true);
    }
    progress.done();
    write_file_atomically((job.out / "result.json").string(), summary.dump(2) + "\n", "result");
    if (!a.flag("no-plots")) write_plots(job.out, job.target);
    if (a.flag("json"))
        std::cout << summary.dump(2) << "\n";
    else
        std::cout << table
                  << fmt::format("metrics: {}/<algorithm>/peer<r>.jsonl, summary: {}/result.json\n",
                                 job.out.string(), job.out.string());
    return status;
}

}  // namespace gossamer::cli
