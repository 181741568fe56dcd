#pragma once
/// The job of one real peer process (`gossamer peer`): join, train, evaluate, checkpoint,
/// average, write (job_setup.hpp assembles it from the loaded and checked inputs first).

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gossamer/bootstrap/settings.hpp"
#include "gossamer/core/checkpoint_file.hpp"
#include "gossamer/core/cluster.hpp"
#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/optimizers/local/training_worker.hpp"
#include "gossamer/optimizers/protocol/protocol.hpp"
#include "gossamer/peer/driver.hpp"
#include "gossamer/topology/topology_file.hpp"

namespace gossamer::peer {

/// One peer's job, every input loaded and checked.
struct PeerJob {
    topology::Topology topology;
    int rank = 0;
    std::string algorithm;
    optim::TrainingConfig config;
    optim::TrainingData data;
    int epochs = 1;
    std::filesystem::path out;
    std::string token;
    std::uint64_t job_id = 1;
    std::int64_t checkpoint_every = 0;  ///< 0: none
    bool json = false;                  ///< print a JSON summary on stdout at the end
    /// Enter a job that is already running (`--join`, docs/operations/elastic.md): Bootstrap::join,
    /// then Protocol::join (a rejoin when resumed from this rank's checkpoint).
    bool join_running = false;
    /// Rank 0: start without the ranks that did not join within the join timeout when at least
    /// this many did (`--min-peers`; 0: all must join). They may --join later.
    int min_peers = 0;
    /// Rank 0 with min_peers: ranks not awaited at the start-up barrier, which join later (the
    /// cluster file's join_at > 0; bootstrap::Options::late).
    std::vector<int> late_ranks;
    double eval_interval = 2;          ///< seconds between evaluation points, > 0
    std::int64_t eval_samples = 2000;  ///< the first test samples each evaluation uses; 0: none
    std::chrono::milliseconds join_timeout{30'000}, stall_timeout{120'000},
        average_timeout{600'000};
    /// The cluster file this peer emulates (step times, links, failure and leave times) and its
    /// path; null: natural speed.
    std::shared_ptr<const Cluster> cluster;
    std::string cluster_path;
    /// The job's time origin (`--job-start`; DriverOptions::job_start).
    std::optional<std::chrono::system_clock::time_point> job_start;
    /// `--resume DIR [--resume-step S]`: restart from DIR's checkpoints (prepare_checkpoints).
    std::optional<std::filesystem::path> resume;
    std::optional<std::int64_t> resume_step;
    /// `--trace FILE`: this peer's timeline and the bound on its events (DriverOptions).
    std::string trace_path;
    std::size_t trace_limit = 64'000'000;
    optim::TrainingWorker worker;
    std::unique_ptr<proto::Protocol> protocol;
    /// Filled once, by assemble_peer_job (driver_options, cluster_options.hpp): the cluster's
    /// emulation, the job's clock, timeouts, the metrics and trace paths. run_peer_job adds the
    /// hooks of the joined job to a copy.
    DriverOptions driver;
    /// What the handshake compares besides job, token, peers and model (peer/settings.hpp).
    std::vector<bootstrap::Setting> settings;
    /// Set by prepare_checkpoints when the protocol takes snapshots: what each
    /// OUT/checkpoint-<R>-<S>.state says of its job (its step set per file).
    std::optional<CheckpointHeader> checkpoint;
};

/// After the protocol and settings are set up, before the peer joins (resume.cpp,
/// docs/operations/checkpoint.md): with checkpoint_every > 0, switches on the protocol's snapshots
/// (an algorithm that cannot resume gets one note line and model checkpoints only); with `resume`,
/// restores the protocol from DIR's checkpoint of this rank at resume_step(DIR, n, rank,
/// `step`) and adds the resume step to the settings the handshake compares. Throws ConfigError
/// (one line, exit 2) for an algorithm that cannot resume, no common step, a checkpoint of
/// another job or layout, or a truncated or corrupt file.
void prepare_checkpoints(PeerJob& job, const std::optional<std::filesystem::path>& resume,
                         std::optional<std::int64_t> step);

/// Exit status of a peer that may not write the job's result (docs/modules/peer.md, "Membership"):
/// it reaches no strict majority of the job's peers, or it was paused longer than the heartbeat
/// timeout and found peers lost. It writes nothing.
inline constexpr int kNoResult = 4;
/// Exit status of a peer at its cluster file's failure time (an emulated crash: no goodbye).
inline constexpr int kEmulatedFailure = 3;
/// Exit status of a peer whose own loss or model became NaN or infinite (it leaves as a crash
/// does, writing nothing), and of the result writer whose exact average is not finite.
inline constexpr int kDiverged = 5;

/// Any thread or a signal handler: asks the running peer to leave the job gracefully at its
/// next step boundary (`gossamer peer` on SIGTERM; docs/operations/elastic.md). Async-signal-safe.
void request_leave() noexcept;
/// Installs a SIGTERM handler that calls request_leave() once; a second SIGTERM ends the
/// process as the default action does.
void leave_on_sigterm();

/// Joins, trains, averages; returns the exit status (0 finished, 1 stopped, 2 refused by the
/// job: a token, job, topology, model or setting that does not match, kNoResult not a member of
/// the job's majority). Exits the process with status 3 at the cluster file's failure time,
/// without a goodbye.
int run_peer_job(PeerJob& job);

}  // namespace gossamer::peer
