#pragma once
/// The whole of `gossamer launch` below its flags (docs/operations/cli.md): the job assembled
/// from what the flags ask for, loaded and checked before anything runs or is written
/// (prepare_job, check_restart, load_job_data), then every algorithm run in turn with its
/// result files (run_job). The command line parses the flags into a LaunchRequest and prints
/// the table.

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gossamer/core/json.hpp"
#include "gossamer/core/progress.hpp"
#include "gossamer/launch/launch.hpp"

namespace gossamer::launch {

/// What the flags of `gossamer launch` ask for, each parsed but nothing loaded yet.
struct LaunchRequest {
    std::string topology_path, config_path;
    std::optional<std::string> cluster_path;
    std::vector<std::string> algorithms;  ///< checked names; "ddp", "diloco": torch rows
    std::optional<std::string> out;       ///< --out (default out/launch)
    std::optional<int> epochs;            ///< default: the config's training.epochs
    std::optional<int> threads_per_peer;  ///< default: cores / n, at least 1
    double timeout = 3600;
    std::optional<std::string> timeout_text;  ///< --timeout as given, for its error line
    double eval_interval = 2;
    std::int64_t eval_samples = 2000;
    std::optional<std::string> trace;
    std::size_t trace_limit = 64'000'000;
    bool live = false;
    std::optional<double> target;  ///< default: the config's training.target_accuracy
    /// --target-loss: a validation loss at most X (default: training.target_loss when there is
    /// no accuracy target).
    std::optional<double> target_loss;
    bool inproc = false;
    std::string hosts = "local";  ///< local or netns (anything else is refused)
    std::optional<std::string> script;
    std::optional<std::string> script_args;  ///< split at spaces
    std::optional<std::int64_t> checkpoint_every;
    std::optional<std::string> resume;  ///< --resume OUT
    /// The torch rows' scripts: "ddp" -> bench/ddp_ref.py, "diloco" -> bench/diloco_ref.py of
    /// the source tree (GOSSAMER_DDP_SCRIPT and GOSSAMER_DILOCO_SCRIPT override them; a row
    /// not here: its path relative to the working folder).
    std::map<std::string, std::string> torch_scripts;
};

/// Loads the topology, the cluster and the training config, and checks the request against
/// them, against itself (--inproc with --script, ddp or diloco, --hosts netns, --resume...) and
/// against this machine (the lab's requirements, the torch rows' and --script files). Throws
/// ConfigError (one line, exit 2) for the first thing wrong; nothing is written.
LaunchJob prepare_job(const LaunchRequest& request);

/// After prepare_job (and the cli's elastic checks of a cluster with churn): refuses churn the
/// launch cannot follow (check_churn), checks --resume against the request and reads the step
/// each algorithm resumes at (every peer's checkpoint in OUT/<algorithm>/), and refuses peers
/// whose host is not this machine.
void check_restart(LaunchJob& job, const LaunchRequest& request);

/// The training data, loaded once here (progress line "loading ..."), with one BLAS thread:
/// the n peers share the machine's cores.
std::unique_ptr<optim::TrainingData> load_job_data(const LaunchJob& job, Progress& progress);

/// After the cli's option checks on `data`: refuses a batch that does not fit the smallest shard
/// and counts the steps of all peers together (the progress line's).
void check_job_data(LaunchJob& job, const optim::TrainingData& data);

/// What run_job did: the exit status (0 every algorithm finished or survived its lost peers, 1
/// one did not, 3 a peer diverged), one row per algorithm and OUT/result.json's summary.
struct LaunchOutcome {
    int status = 0;
    std::vector<LaunchRow> rows;
    json::Json summary;
};

/// Makes OUT ready (replaced, or kept for --resume), builds the lab for --hosts netns, runs every
/// algorithm in turn (processes, or threads over `data` with --inproc), writes
/// OUT/<algorithm>/result.json and OUT/result.json. Throws Interrupted when SIGINT or SIGTERM
/// stopped the peers (processes).
LaunchOutcome run_job(const LaunchJob& job, const optim::TrainingData* data, Progress& progress);

/// Runs the plot script (scripts/plot.py; GOSSAMER_PLOT_SCRIPT overrides `script`) on OUT; a
/// missing Python or matplotlib is one warning line, never a failure of the launch.
void write_plots(const std::filesystem::path& out, std::optional<double> target,
                 const std::string& script);

}  // namespace gossamer::launch
