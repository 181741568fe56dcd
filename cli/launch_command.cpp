// gossamer launch: the n peers of a topology for real, one algorithm after another: as
// `gossamer peer` processes over UCX (default) or as threads over the in-process transport
// (--inproc), with the cluster file's heterogeneity emulated (docs/operations/cli.md). Parses the
// flags into a launch::LaunchRequest; the job is launch/'s (gossamer/launch/launch_job.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <optional>

#include "algorithms.hpp"
#include "args.hpp"
#include "commands.hpp"
#include "gossamer/core/cluster.hpp"
#include "gossamer/core/progress.hpp"
#include "gossamer/launch/launch_job.hpp"
#include "launch_print.hpp"

namespace gossamer::cli {
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
          "comma-separated (default " + default_launch_algorithms() +
              "); ddp: torch DDP over gloo on the same job (bench/ddp_ref.py); diloco: torch "
              "DiLoCo over gloo on the same job and the config's \"outer\" section "
              "(bench/diloco_ref.py; docs/results/benchmarks.md)"},
         {"epochs", "N", "passes of each peer over its shard (default: training.epochs)"},
         {"threads-per-peer", "N", "BLAS threads of each peer (default cores / n, >= 1)"},
         {"target", "ACC",
          "target accuracy for the time-to-target column (default: "
          "training.target_accuracy)"},
         {"target-loss", "LOSS",
          "time to target as validation loss at most LOSS, the peers' mean (default: "
          "training.target_loss when no accuracy target is set)"},
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
    launch::LaunchRequest r;
    r.topology_path = *a.value("topology");
    r.config_path = *a.value("config");
    r.cluster_path = a.value("cluster");
    r.algorithms = parse_algorithms(a.value("algorithms").value_or(default_launch_algorithms()),
                                    {"ddp", "diloco"});
    r.out = a.value("out");
    if (a.value("epochs")) r.epochs = static_cast<int>(a.integer("epochs", 1, 1, 100000));
    if (a.value("threads-per-peer"))
        r.threads_per_peer = static_cast<int>(a.integer("threads-per-peer", 1, 1, 1024));
    r.timeout = a.number("timeout", 3600.0);
    r.timeout_text = a.value("timeout");
    r.eval_interval = eval_interval_option(a);
    r.eval_samples = a.integer("eval-samples", 2000, 1, INT64_MAX);
    r.trace = a.value("trace");
    r.trace_limit = trace_limit_bytes(a);
    r.live = a.flag("live");
    if (a.value("target")) r.target = a.number("target", 0);
    if (a.value("target-loss")) r.target_loss = a.number("target-loss", 0);
    r.inproc = a.flag("inproc");
    r.hosts = a.value("hosts").value_or("local");
    r.script = a.value("script");
    r.script_args = a.value("script-args");
    if (a.value("checkpoint-every"))
        r.checkpoint_every = a.integer("checkpoint-every", 0, 0, INT64_MAX);
    r.resume = a.value("resume");
    r.torch_scripts = {{"ddp", GOSSAMER_SOURCE_DIR "/bench/ddp_ref.py"},
                       {"diloco", GOSSAMER_SOURCE_DIR "/bench/diloco_ref.py"}};

    // Everything is loaded and checked before anything runs or is written.
    auto job = launch::prepare_job(r);
    // A cluster file with churn: algorithms that can follow it, and a launch that can.
    if (job.cluster && job.cluster->has_churn())
        check_elastic(job.algorithms, *job.config, job.config_path, job.topology.schedule,
                      *job.cluster_path);
    launch::check_restart(job, r);
    Progress progress(30.0);
    auto data = launch::load_job_data(job, progress);
    std::vector<std::string> protocols;  // the torch rows are no protocols of Gossamer's
    std::copy_if(job.algorithms.begin(), job.algorithms.end(), std::back_inserter(protocols),
                 [](const std::string& a) { return a != "ddp" && a != "diloco"; });
    check_algorithms(protocols, job.config.get(), &data->train, job.topology.schedule, 0);
    launch::check_job_data(job, *data);
    if (!job.inproc) data.reset();  // the peer processes load their own

    launch::LaunchOutcome outcome;
    try {
        outcome = launch::run_job(job, data.get(), progress);
    } catch (const launch::Interrupted& stop) {
        return 128 + stop.signal;
    }
    if (!a.flag("no-plots"))
        launch::write_plots(job.out, job.target_is_loss ? std::nullopt : job.target,
                            GOSSAMER_SOURCE_DIR "/scripts/plot.py");
    if (a.flag("json"))
        std::cout << outcome.summary.dump(2) << "\n";
    else
        std::cout << launch_table(job, outcome.rows)
                  << fmt::format("metrics: {}/<algorithm>/peer<r>.jsonl, summary: {}/result.json\n",
                                 job.out.string(), job.out.string());
    return outcome.status;
}

}  // namespace gossamer::cli
