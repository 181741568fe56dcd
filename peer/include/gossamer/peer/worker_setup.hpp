#pragma once
/// The local worker a real peer trains with, built exactly as `gossamer sim` builds each virtual
/// peer's, so a real run and a simulation of the same config compare step for step.

#include <cstdint>
#include <memory>

#include "gossamer/core/dataset.hpp"
#include "gossamer/optimizers/local/local_trainer.hpp"
#include "gossamer/optimizers/local/training_config.hpp"

namespace gossamer::peer {

struct TrainingWorker {
    std::unique_ptr<Dataset> shard;  ///< this peer's samples (the trainer reads them)
    std::unique_ptr<optim::LocalTrainer> trainer;
    std::int64_t steps = 0;  ///< local steps for `epochs` passes over the shard
};

/// Peer `rank` of `n`: its shard of `train` (config.sharding), the model, partitions, multirate
/// rates, optimizer and schedule of `config`. Throws ConfigError when the batch does not fit.
TrainingWorker make_training_worker(const optim::TrainingConfig& config, const Dataset& train,
                                    int rank, int n, int epochs);

}  // namespace gossamer::peer
