#pragma once
/// N real-time peers as threads of one process over the in-process transport: the local
/// launcher's core and what the tests use. Each peer has its own Driver on its own thread.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gossamer/core/dataset.hpp"
#include "gossamer/core/json.hpp"
#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/optimizers/protocol/protocol.hpp"
#include "gossamer/peer/driver.hpp"
#include "gossamer/topology/schedule.hpp"

namespace gossamer::peer {

/// What one peer's thread saw.
struct PeerOutcome {
    std::optional<DriverResult> result;  ///< set when run() returned
    std::string error;                   ///< what run() threw, if it threw
    std::optional<int> failed_rank;      ///< PeerFailure::rank() when it threw one
    bool diverged = false;               ///< it threw Diverged (its loss or model not finite)
    double seconds = 0;                  ///< wall time of run()
};

/// Runs protocols[r] with workers[r] as rank r, each on its own thread with its own inproc
/// transport (job id 7, send timeout 5 s). All peers join before any sends. A peer that stops at
/// fail_at drops its transport at once (the others see it leave); the others keep theirs until
/// every driver returned, as finished processes stay reachable until the launcher ends the job.
std::vector<PeerOutcome> run_inproc_peers(const std::vector<proto::Protocol*>& protocols,
                                          const std::vector<proto::LocalWorker*>& workers,
                                          const std::function<DriverOptions(int rank)>& options);

/// A training job of n = topology->n() peers, as `gossamer sim` sets one up in math mode.
struct LocalTraining {
    std::string algorithm;
    const json::Node* algorithm_options = nullptr;
    std::shared_ptr<const topology::Schedule> topology;
    const optim::TrainingConfig* config = nullptr;
    const Dataset* train = nullptr;
    const Dataset* test = nullptr;
    int epochs = 1;
    std::function<DriverOptions(int rank)> options;  ///< empty: the defaults
    /// The cluster file the job emulates, for "chunk_bytes": "auto" (null: none).
    std::shared_ptr<const Cluster> cluster;
    /// Called on rank's thread with its protocol and the options from `options`, before its
    /// driver starts: hooks that read the protocol's model (evaluation points). May be empty.
    std::function<void(int rank, const proto::Protocol& protocol, DriverOptions& options)> attach;
};

struct LocalTrainingResult {
    std::vector<PeerOutcome> peers;
    /// The exact average of the surviving peers' models (weighted by push-sum mass, as sim
    /// does), evaluated on the test set; nullopt when no peer survived.
    std::optional<double> loss, accuracy;
};

/// Builds the workers and protocols, runs them with run_inproc_peers, evaluates the average.
/// Throws ConfigError for bad options or a batch that does not fit.
LocalTrainingResult run_local_training(const LocalTraining& job);

}  // namespace gossamer::peer
