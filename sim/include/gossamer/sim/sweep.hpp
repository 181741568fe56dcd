#pragma once
/// What `gossamer sim` runs: every algorithm of a list, each over several seeds, on one setup;
/// each run's files under OUT/<algorithm>/seed<k>/ and, per algorithm, the statistics over its
/// seeds (docs/modules/simulator.md). The command line only parses its flags into a SweepSpec
/// and prints the summaries.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gossamer/core/json.hpp"
#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/sim/setup_checks.hpp"
#include "gossamer/sim/simulation.hpp"
#include "gossamer/sim/sweep_stats.hpp"

namespace gossamer::sim {

struct SweepSpec {
    /// Topology, cluster, mode, data, epochs or steps, evaluation: what every run shares. Its
    /// algorithm, options, seed and config are set per run.
    SimSetup base;
    std::vector<std::string> algorithms;
    int seeds = 1;  ///< seed k of an algorithm uses the config's seed + k (1 + k without one)
    /// The training config (math mode; optional in cost mode); each run gets a copy with its
    /// seed as training and sharding seed.
    const optim::TrainingConfig* config = nullptr;
    std::filesystem::path out;  ///< OUT: OUT/<algorithm>/seed<k>/{metrics,peers}.jsonl
    /// --trace FILE: each run's timeline; several runs: FILE-<algorithm>-seed<k>.json each.
    std::optional<std::string> trace_file;
    std::size_t trace_limit = 64'000'000;  ///< bytes, per run
    double goal = std::nan("");            ///< the target accuracy; NaN: none
    bool goal_is_loss = false;             ///< goal is a validation loss (at most) instead
    /// Progress lines: (line, keep) as gossamer::Progress takes them. May be empty.
    std::function<void(std::string_view, bool)> progress;
};

/// One finished run, for the caller's progress lines.
struct RunReport {
    const std::string& algorithm;
    int seed_index = 0;  ///< k of seed<k>
    const SimResult& result;
    /// The trace written for it (--trace), its events and the sampling of steps (1: all).
    std::optional<std::string> trace_path;
    std::size_t trace_events = 0;
    std::int64_t trace_every = 1;
};

/// Where the values that bound a sweep came from, for check_sweep's error lines.
struct SweepOrigins {
    SizeOrigin size;
    WorkOrigin work;
};

/// The default evaluation interval of a math-mode sweep: a quarter of a nominal epoch of the
/// fastest peer (its base_time x factor per step, `batches` steps per epoch), virtual seconds.
Time nominal_eval_interval(const Cluster& cluster, double batches);

/// Before anything runs or is written: every algorithm's sizes (check_sizes, with `parameters`
/// floats per model) and the work of its runs (check_work, `steps` local steps per peer), so
/// that a bad value for the last algorithm does not leave the others' results half-written.
void check_sweep(const SweepSpec& spec, std::uint64_t parameters, double steps,
                 const SweepOrigins& origins);

/// Runs every algorithm for every seed, writes each run's folder (whole or not at all, see
/// write_run) and the trace, calls `on_run` after each run, and returns one summary per
/// algorithm, in the order of spec.algorithms.
std::vector<AlgorithmSummary> run_sweep(const SweepSpec& spec,
                                        const std::function<void(const RunReport&)>& on_run = {});

/// DIR/metrics.jsonl (the evaluations), DIR/peers.jsonl (the recorded peers) and, with churn or
/// failures, DIR/topology.jsonl (each version of the topology; docs/operations/elastic.md). The
/// folder appears whole or not at all: it is written as DIR.partial and renamed, so a full disk
/// leaves no folder that looks complete (the error names the file and the cause).
void write_run(const std::filesystem::path& dir, const SimResult& result);

}  // namespace gossamer::sim
