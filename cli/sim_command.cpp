// gossamer sim: many peers with heterogeneous speeds in virtual time (docs/modules/simulator.md).
// Parses the flags into a sweep (gossamer/sim/sweep.hpp), runs it and prints its summary.
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <optional>

#include "algorithms.hpp"
#include "args.hpp"
#include "commands.hpp"
#include "gossamer/core/blas.hpp"
#include "gossamer/core/file_io.hpp"
#include "gossamer/core/memory.hpp"
#include "gossamer/core/output_dir.hpp"
#include "gossamer/core/progress.hpp"
#include "gossamer/core/trace.hpp"
#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/sim/sweep.hpp"
#include "gossamer/topology/topology_file.hpp"
#include "sim_print.hpp"

namespace gossamer::cli {

int run_sim(const std::vector<std::string>& args) {
    ArgParser p(
        "gossamer sim", "--topology T --cluster C --config TRAIN [options]",
        "Simulates n peers (n from the topology) in virtual time: every peer runs the "
        "same protocol objects as a real peer; compute and links follow the cluster "
        "file. Each algorithm runs on the same data order and cluster; the table shows "
        "the virtual time to the target accuracy, the final accuracy of the exact average "
        "of the peers' models (and min/max over peers), the consensus distance, samples/s, "
        "bytes sent per peer, backward multiply-adds per peer (GMAC) and the share of "
        "time peers sat idle. Writes "
        "OUT/<algorithm>/seed<k>/{metrics,peers}.jsonl; scripts/plot.py OUT draws them." +
            algorithms_help(),
        {{"topology", "FILE", "the topology file"},
         {"cluster", "FILE", "the cluster file (docs/formats/cluster-format.md)"},
         {"config", "FILE", "the training config (math mode; optional in cost mode)"},
         {"algorithms", "LIST", "comma-separated (default " + default_sim_algorithms() + ")"},
         {"seeds", "K", "seeds per algorithm (default 1)"},
         {"out", "DIR", "output folder (default out/sim)"},
         {"mode", "M", "math (default) or cost (no values: timing and traffic only)"},
         {"network", "MODEL",
          "fair (max-min fair sharing between the messages in flight) or fifo (one "
          "message at a time per link, the model before 2026-12-02); default: the "
          "cluster file's network.model, else fair"},
         {"epochs", "N", "passes of each peer over its shard (default: training.epochs)"},
         {"steps", "N", "cost mode: local steps per peer (default 100)"},
         {"model-size", "N",
          "cost mode: parameters per model (default: the config's model, else 1000000)"},
         {"eval-interval", "S",
          "virtual seconds between evaluations (default: a quarter of a nominal epoch)"},
         {"target", "ACC", "target accuracy (default: training.target_accuracy)"},
         {"target-loss", "LOSS",
          "target: validation loss at most LOSS (default: training.target_loss when the config "
          "sets no target accuracy)"},
         {"peer-eval-samples", "N",
          "test samples of each peer's own evaluation (default 2000; gossamer launch's "
          "--eval-samples)"},
         {"average-eval-samples", "N",
          "test samples of the exact average's evaluation at each tick (default: the "
          "whole test set; the final evaluation always uses the whole set)"},
         {"peer-metrics", "M",
          "peers.jsonl records: all, sample K (about K peers, evenly spread) or none "
          "(default: all up to 4096 peers, else sample 1024)"},
         {"trace", "FILE",
          "write the timeline (Chrome trace / Perfetto JSON, docs/formats/trace.md) to FILE; "
          "several algorithms or seeds: FILE-<algorithm>-seed<k>.json each"},
         {"trace-limit", "MB",
          "bound on each trace's events (default 64); past it whole steps are sampled "
          "and the file says so"},
         {"json", "", "print the summary as JSON"},
         {"save", "FILE", "also write the JSON summary to FILE"}},
        0);
    auto a = p.parse(args);
    if (a.help) return std::cout << p.help(), 0;
    for (const char* req : {"topology", "cluster"})
        if (!a.value(req))
            throw UsageError(fmt::format("gossamer sim: --{} FILE is required", req));
    const std::string mode_name = a.value("mode").value_or("math");
    if (mode_name != "math" && mode_name != "cost") throw UsageError("--mode: use math or cost");
    const auto mode = mode_name == "math" ? sim::Mode::math : sim::Mode::cost;
    const bool math = mode == sim::Mode::math;
    if (math && !a.value("config"))
        throw UsageError("gossamer sim: --config FILE is required in math mode");

    // Everything is loaded and checked before anything runs or is written.
    auto topo = topology::load_topology(*a.value("topology"));
    auto cluster = load_cluster(*a.value("cluster"), topo.n());
    if (auto m = a.value("network")) {
        const auto model = network_model_from(*m);
        if (!model)
            throw UsageError(fmt::format("--network: unknown model \"{}\"; use fair or fifo", *m));
        cluster.network_model = *model;
    }
    sim::SweepSpec spec;
    spec.algorithms = parse_algorithms(a.value("algorithms").value_or(default_sim_algorithms()));
    spec.seeds = static_cast<int>(a.integer("seeds", 1, 1, 1000));
    spec.out = a.value("out").value_or("out/sim");
    std::optional<optim::TrainingConfig> cfg;
    optim::TrainingData data;
    if (a.value("config")) cfg = optim::load_training_config(*a.value("config"));
    spec.config = cfg ? &*cfg : nullptr;
    Progress progress(30.0);
    set_blas_threads(1);
    sim::SimSetup& base = spec.base;
    base.topology = topo.schedule;
    base.cluster = &cluster;
    base.failure_detection = cluster.failure_detection;
    base.mode = mode;
    double steps = 0;  // local steps per peer, for the bound on a run's work
    if (math) {
        base.peer_eval_samples =
            static_cast<int>(a.integer("peer-eval-samples", 2000, 1, 100'000'000));
        base.average_eval_samples =
            static_cast<int>(a.integer("average-eval-samples", 0, 1, 100'000'000));
        progress(fmt::format("loading {}", cfg->data.name));
        data = optim::load_training_data(*cfg);
        base.train = &data.train;
        base.test = &data.test;
        base.epochs = static_cast<int>(a.integer("epochs", cfg->epochs, 1, 100000));
        const double batches = static_cast<double>(data.train.size()) / topo.n() / cfg->batch_size;
        steps = base.epochs * batches;
        base.eval_interval =
            a.number("eval-interval", sim::nominal_eval_interval(cluster, batches));
        if (!(base.eval_interval > 0)) throw UsageError("--eval-interval: must be > 0");
    } else {
        base.steps = a.integer("steps", 100, 1, 1'000'000'000);
        steps = static_cast<double>(base.steps);
        std::uint64_t size = 1'000'000;
        if (cfg) {
            progress("loading data for the model size");
            data = optim::load_training_data(*cfg);
            size = optim::build_model(*cfg, data.train)->parameter_count();
        }
        base.model_size = static_cast<std::uint64_t>(
            a.integer("model-size", static_cast<std::int64_t>(size), 1, INT64_MAX));
    }
    base.peer_records_every = peer_records_every(a.value("peer-metrics"), topo.n());
    spec.trace_file = a.value("trace");
    spec.trace_limit = trace_limit_bytes(a);
    if (spec.trace_file) trace::check_writable(*spec.trace_file, "--trace");
    set_goal(spec, a, spec.config);

    // Every algorithm's options, sizes (memory, resync timeouts against the transfer of one full
    // model) and work are checked before the first one runs; then the output folder is made
    // ready (docs/operations/cli.md).
    check_algorithms(spec.algorithms, spec.config, math ? &data.train : nullptr, topo.schedule,
                     base.model_size);
    const std::uint64_t parameters =
        math ? optim::build_model(*cfg, data.train)->parameter_count() : base.model_size;
    const bool epochs_flag = !math || a.value("epochs");
    sim::check_sweep(
        spec, parameters, steps,
        {{cfg ? cfg->doc.file : "", !math && a.value("model-size") ? "--model-size" : ""},
         {epochs_flag ? "" : cfg->doc.file,
          !math         ? "--steps"
          : epochs_flag ? "--epochs"
                        : "training.epochs",
          a.value("eval-interval").has_value()}});
    if (auto notice = prepare_output_dir(spec.out, "gossamer sim", {"", "--out"}))
        std::cerr << "note: " << *notice << "\n";
    AllocationScope scope(
        fmt::format("the state of {} simulated peers of {} parameters", topo.n(), parameters));

    spec.progress = [&](std::string_view line, bool keep) { progress(line, keep); };
    const auto rows =
        sim::run_sweep(spec, [&](const sim::RunReport& run) { print_run(run, progress); });
    progress.done();
    json::Json summary = {{"topology", *a.value("topology")},
                          {"cluster", *a.value("cluster")},
                          {"n", topo.n()},
                          {"mode", mode_name},
                          {"network", to_string(cluster.network_model)},
                          {"seeds", spec.seeds},
                          {"algorithms", json::Json::array()}};
    for (const auto& row : rows) summary["algorithms"].push_back(sim::to_json(row));
    if (auto path = a.value("save"))
        write_file_atomically(*path, summary.dump(2) + "\n", "summary (--save)");
    if (a.flag("json"))
        std::cout << summary.dump(2) << "\n";
    else
        std::cout
            << sim_table(rows, spec.goal)
            << fmt::format(
                   "metrics: {}/<algorithm>/seed<k>/; plots: /usr/bin/python3 scripts/plot.py "
                   "{}\n",
                   spec.out.string(), spec.out.string());
    return 0;
}

}  // namespace gossamer::cli
