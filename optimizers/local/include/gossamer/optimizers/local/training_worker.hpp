#pragma once
/// The training worker of one peer, built the same way by both drivers (`gossamer sim`'s virtual
/// peers and real peers), so that a simulation and a real run of one config compare step for
/// step: the same shard, model, partitions, multirate rates, optimizer and schedule, made in the
/// same order from the same seeds.

#include <cstdint>
#include <functional>
#include <memory>

#include "gossamer/core/dataset.hpp"
#include "gossamer/optimizers/local/local_trainer.hpp"
#include "gossamer/optimizers/local/training_config.hpp"

namespace gossamer::optim {

struct TrainingWorker {
    std::unique_ptr<Dataset> shard;  ///< this peer's samples (the trainer reads them)
    std::unique_ptr<LocalTrainer> trainer;
    /// The outer layer around `trainer` when the config has "outer" (and it is not the identity:
    /// OuterOptions::identity()); else null.
    std::unique_ptr<proto::LocalWorker> outer;
    std::int64_t steps = 0;        ///< protocol steps: local steps, or rounds under "outer"
    std::int64_t inner_steps = 0;  ///< local steps for `epochs` passes over the shard
    /// The worker the protocol drives: the outer layer, or the trainer itself.
    proto::LocalWorker& protocol_worker() const {
        return outer ? *outer : static_cast<proto::LocalWorker&>(*trainer);
    }
};

/// Peer `rank` of `n`: its shard of `train` (config.sharding), the model, partitions, multirate
/// rates, optimizer and schedule of `config`. `check_rates`, when given, checks the multirate
/// rates before the trainer is built (against the algorithm: proto::check_multirate_algorithm,
/// whose registry entry says whether it gossips per partition). Throws ConfigError when the batch
/// does not fit the shard, the rates do not suit the algorithm or the schedule the run.
TrainingWorker make_training_worker(const TrainingConfig& config, const Dataset& train, int rank,
                                    int n, int epochs,
                                    const std::function<void(const Multirate&)>& check_rates = {});

}  // namespace gossamer::optim
