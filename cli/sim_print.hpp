#pragma once
/// What `gossamer sim` prints: the progress lines after each run and the summary table
/// (sim_print.cpp); the runs and their statistics are sim/'s (gossamer/sim/sweep.hpp).

#include <optional>
#include <string>
#include <vector>

#include "args.hpp"
#include "gossamer/core/progress.hpp"
#include "gossamer/sim/sweep.hpp"

namespace gossamer::cli {

/// --peer-metrics: which ranks get a peers.jsonl record (SimSetup::peer_records_every), for n
/// peers; UsageError for a value that is not all, none or "sample K".
int peer_records_every(const std::optional<std::string>& value, int n);

/// The lines after one run: its trace, its events per second, a failure that stopped it and
/// (first seed) the versions of the topology it went through.
void print_run(const sim::RunReport& run, Progress& progress);

/// The time-to-target goal of spec: --target (an accuracy), else --target-loss (a validation
/// loss at most X), else training.target_accuracy, else training.target_loss; UsageError for
/// both flags.
void set_goal(sim::SweepSpec& spec, const ParsedArgs& a, const optim::TrainingConfig* config);

/// The comparison table, one row per algorithm; `goal` the target accuracy, or the target loss
/// when the rows say goal_is_loss (NaN: none).
std::string sim_table(const std::vector<sim::AlgorithmSummary>& rows, double goal);

}  // namespace gossamer::cli
