#include "gossamer/peer/worker_setup.hpp"

#include "gossamer/core/sharding.hpp"

namespace gossamer::peer {

// Mirrors sim::Engine's construction of a math-mode peer (sim/src/simulation.cpp).
TrainingWorker make_training_worker(const optim::TrainingConfig& config, const Dataset& train,
                                    int rank, int n, int epochs) {
    ShardSpec spec = config.sharding;
    spec.peers = n;
    TrainingWorker w;
    w.shard = std::make_unique<Dataset>(shard_for_peer(train, spec, rank));
    optim::check_batch_size(config, w.shard->size());
    w.steps = w.shard->size() / config.batch_size * epochs;
    auto model = optim::build_model(config, train);
    auto layout = optim::build_partitions(config, *model);
    auto rates = optim::build_multirate(config, layout);
    w.trainer = std::make_unique<optim::LocalTrainer>(
        std::move(model), layout, config.optimizer, optim::build_schedule(config, w.steps),
        *w.shard, config.batch_size, config.seed, rank);
    w.trainer->set_multirate(std::move(rates));
    return w;
}

}  // namespace gossamer::peer
