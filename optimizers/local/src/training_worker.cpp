#include "gossamer/optimizers/local/training_worker.hpp"

#include <algorithm>

#include "gossamer/core/sharding.hpp"
#include "gossamer/optimizers/local/multirate.hpp"
#include "gossamer/optimizers/outer/streaming_worker.hpp"

namespace gossamer::optim {

// The order is part of the contract: the model draws its initial values from the config's seed,
// and of two bad inputs the one checked first is the one reported.
TrainingWorker make_training_worker(const TrainingConfig& config, const Dataset& train, int rank,
                                    int n, int epochs,
                                    const std::function<void(const Multirate&)>& check_rates) {
    ShardSpec spec = config.sharding;
    spec.peers = n;
    TrainingWorker w;
    const auto shards = shard_indices(train, spec);
    w.shard = std::make_unique<Dataset>(shard_for_peer(train, shards, rank));
    check_batch_size(config, w.shard->size());
    // Equal shards (no "sizes") may still differ by one sample, and so by one batch: every
    // peer then takes the smallest shard's steps, or a synchronous protocol's last round would
    // wait for peers that have stopped (8 peers on 14,062 text windows, batch 2: 879 and 878).
    std::int64_t per_epoch = w.shard->size() / config.batch_size;
    if (spec.sizes.empty())
        for (const auto& s : shards)
            per_epoch = std::min<std::int64_t>(
                per_epoch, static_cast<std::int64_t>(s.size()) / config.batch_size);
    w.steps = per_epoch * epochs;
    auto model = build_model(config, train);
    auto layout = build_partitions(config, *model);
    auto rates = build_multirate(config, layout);
    if (check_rates) check_rates(rates);
    w.trainer = std::make_unique<LocalTrainer>(std::move(model), layout, config.optimizer,
                                               build_schedule(config, w.steps), *w.shard,
                                               config.batch_size, config.seed, rank);
    w.trainer->set_multirate(std::move(rates));
    w.inner_steps = w.steps;
    if (config.outer && !config.outer->identity()) {
        if (!config.outer->timed()) {  // rounds of fixed steps, streamed or not
            w.outer = make_outer_layer(*w.trainer, *config.outer, w.inner_steps,
                                       &w.trainer->layout(), config.doc.file);
            w.steps = outer_rounds(w.inner_steps, *config.outer);
            return w;
        }
        // Rounds by time (never streamed): every peer takes the job's rounds, set by the mean
        // shard's steps (a global sample budget), whatever its own shard and speed (outer.md);
        // FedNova's merge needs the inner rates and the peer's share of the data.
        const std::int64_t budget = train.size() / n / config.batch_size * epochs;
        auto outer = std::make_unique<OuterWorker>(*w.trainer, *config.outer, budget,
                                                   &w.trainer->layout(), config.doc.file);
        const LocalTrainer* trainer = w.trainer.get();
        const double momentum =
            config.optimizer.kind == OptimizerKind::sgd ? config.optimizer.momentum : 0.0;
        const double share = static_cast<double>(w.shard->size()) * n /
                             static_cast<double>(std::max<std::int64_t>(train.size(), 1));
        outer->set_inner_rates([trainer](std::int64_t s) { return trainer->lr_at(s); }, momentum,
                               share);
        w.outer = std::move(outer);
        w.steps = outer_rounds(budget, *config.outer);
    }
    return w;
}

}  // namespace gossamer::optim
