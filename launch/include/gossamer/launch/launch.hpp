#pragma once
/// The two ways `gossamer launch` runs one algorithm's peers (docs/operations/cli.md): as `gossamer
/// peer` processes over UCX (the default) or as threads of this process over the in-process
/// transport
/// (`--inproc`). Both answer one row of the comparison table.

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gossamer/core/dataset.hpp"
#include "gossamer/core/json.hpp"
#include "gossamer/core/progress.hpp"
#include "gossamer/lab/lab.hpp"
#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/topology/topology_file.hpp"

namespace gossamer {
struct Cluster;
}

namespace gossamer::launch {

/// Everything `gossamer launch` loaded and checked before anything runs.
struct LaunchJob {
    std::string topology_path, config_path;
    std::optional<std::string> cluster_path;
    topology::Topology topology;
    std::shared_ptr<const Cluster> cluster;  ///< loaded from cluster_path
    std::shared_ptr<const optim::TrainingConfig> config;
    std::vector<std::string> algorithms;  ///< run in this order; "ddp", "diloco": torch_scripts
    bool inproc = false;                  ///< peers as threads over the in-process transport
    std::string hosts = "local";          ///< local, or netns (a lab: `lab`)
    int epochs = 1;
    std::filesystem::path out;
    double timeout = 3600;             ///< seconds one algorithm's peers may run (processes)
    int threads_per_peer = 1;          ///< OPENBLAS_NUM_THREADS of each peer process
    std::int64_t total_steps = 0;      ///< about the steps of all peers together
    double eval_interval = 2;          ///< seconds between the peers' evaluation points
    std::int64_t eval_samples = 2000;  ///< test samples of each evaluation (--eval-samples)
    std::optional<double> target;      ///< accuracy for "time to target" (--target, the config's)
    /// The target is a validation loss at most `target` (--target-loss, training.target_loss).
    bool target_is_loss = false;
    bool text = false;  ///< text data: losses are nats per character, bpc shown (check_job_data)
    /// --script: each peer runs `python script args...` instead of `gossamer peer`; it learns
    /// its rank, topology, algorithm, output folder and config from GOSSAMER_* variables
    /// (gossamer.launched(), docs/library/python.md).
    std::optional<std::string> script;
    std::vector<std::string> script_args;
    std::string python = "/usr/bin/python3";
    /// The reference scripts of the torch rows among the algorithms, absolute: `ddp`
    /// (bench/ddp_ref.py, torch DDP) and `diloco` (bench/diloco_ref.py, torch DiLoCo), each over
    /// gloo on the same job, started as script peers with RANK, WORLD_SIZE, MASTER_ADDR,
    /// MASTER_PORT (docs/results/benchmarks.md).
    std::map<std::string, std::string> torch_scripts;
    /// --hosts netns: each peer process runs as a host of this lab (docs/operations/lab.md): in its
    /// namespace, at its lab address, UCX over TCP on its veth, links shaped by the kernel and
    /// not by the peer. Null: local processes on this machine's addresses.
    const lab::Lab* lab = nullptr;
    /// --trace FILE: each peer records OUT/<algorithm>/peer<r>.trace.json and the launcher
    /// merges them into this file (several algorithms: FILE-<algorithm>.json each).
    std::optional<std::string> trace;
    bool trace_per_algorithm = false;
    std::size_t trace_limit = 64'000'000;  ///< bytes, per peer
    /// --live: a per-peer table (steps, s/step, idle, whom it waits for most) on stderr while
    /// the peers (processes or --inproc threads) run, redrawn in place on a terminal
    /// (docs/operations/report.md, "Live view").
    bool live = false;
    /// --resume: per algorithm, the checkpoint step its peers restart from (each gets
    /// --resume OUT/<algorithm> --resume-step S; docs/operations/checkpoint.md) and the job id of
    /// the stopped job, which its checkpoints carry. Empty: a fresh start.
    /// --checkpoint-every: handed to every peer (none: the config's output.checkpoint_every).
    std::optional<std::int64_t> checkpoint_every;
    struct Resume {
        std::int64_t step = 0;
        std::uint64_t job_id = 0;
    };
    std::map<std::string, Resume> resume;
};

/// One algorithm's outcome: a row of the table and OUT/<algorithm>/result.json.
struct LaunchRow {
    std::string algorithm;
    double wall = 0;   ///< seconds from starting the first peer to the last one's exit
    double train = 0;  ///< the longest peer's training (its driver's end time), seconds
    /// The first evaluation tick at which the mean accuracy of the peers evaluated there reached
    /// the target, seconds (docs/operations/cli.md); none when never reached or no target.
    std::optional<double> time_to_target;
    std::optional<double> accuracy, loss;  ///< of the exact average of the survivors' models
    bool text = false;                     ///< text data: result.json adds "final_bpc"
    double mb_per_peer = 0;
    double idle_share = 0;  ///< mean over the peers that reported
    int failed = 0;         ///< peers lost (emulated failure, crash or divergence)
    /// Of those, peers whose loss or model became NaN or infinite (launch then exits 3).
    int diverged = 0;
    /// From average.json (processes): the ranks whose models it averages, and push-sum's
    /// Σ w over them (null / none where it does not say).
    json::Json survivors;
    std::optional<double> total_mass;
    bool ok = true;  ///< false: the algorithm did not survive (launch exits 1)
    json::Json peers = json::Json::array();  ///< one record per rank
};

/// Thrown when SIGINT or SIGTERM stopped the peers (InterruptGuard); launch exits 128 + signal.
struct Interrupted {
    int signal;
};

/// OUT/<algorithm>/peer<r>.trace.json, rank r's own timeline.
std::filesystem::path peer_trace_path(const LaunchJob& job, const std::string& algorithm, int r);
/// Merges the peers' timelines of `algorithm` (those that wrote one) into the job's trace file;
/// returns its path, or nothing without --trace or when no peer wrote one.
std::optional<std::string> merge_peer_traces(const LaunchJob& job, const std::string& algorithm);

/// Refuses, before anything runs, a launch that cannot follow its cluster file's join_at and
/// rejoin_at (docs/operations/elastic.md, "Real peers"): --inproc (any churn, leave_at too) or
/// --script peers (a late or restarted peer is a `gossamer peer --join` process), a rank 0 that
/// joins late (it is the start-up rendezvous), `resume` (--resume), or --checkpoint-every N > 0 (a
/// job that takes checkpoints cannot be joined yet). Throws ConfigError, one line naming the flag
/// or the cluster file.
void check_churn(const LaunchJob& job, bool inproc, bool resume);

/// Runs `algorithm` as n `gossamer peer` processes writing into OUT/<algorithm>/. With a
/// cluster file that has join_at or rejoin_at, a rank joining late is started at its join_at
/// and a rank at its fail_at again at its rejoin_at, each with --join (docs/operations/elastic.md).
LaunchRow launch_processes(const LaunchJob& job, const std::string& algorithm, Progress& progress);

/// Runs `algorithm` as n threads over the in-process transport.
LaunchRow launch_threads(const LaunchJob& job, const optim::TrainingData& data,
                         const std::string& algorithm, Progress& progress);

/// The row as result.json holds it.
json::Json to_json(const LaunchRow& row);

}  // namespace gossamer::launch
