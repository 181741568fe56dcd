#include "gossamer/optimizers/local_trainer.hpp"

#include "gossamer/core/rng.hpp"

namespace gossamer::optim {

LocalTrainer::LocalTrainer(std::unique_ptr<Model> model, PartitionLayout layout,
                           const OptimizerConfig& optimizer, LrSchedule schedule,
                           const Dataset& shard, int batch_size, std::uint64_t seed, int rank)
    : model_(std::move(model)),
      layout_(std::move(layout)),
      schedule_(std::move(schedule)),
      // Every peer starts from the same model (seed); each draws its own batch order.
      loader_(shard, batch_size, rank == 0 ? seed : derive_seed(seed, static_cast<std::uint64_t>(rank)), rank),
      params_(model_->parameter_count()),
      grad_(model_->parameter_count()) {
    model_->init(params_.span(), seed);
    for (const auto& p : layout_.partitions())
        optimizers_.push_back(make_optimizer(optimizer, p.size));
}

double LocalTrainer::step() {
    const double loss = compute_gradient(params_.span());
    apply_gradient(params_.span(), grad_.span());
    return loss;
}

double LocalTrainer::compute_gradient(std::span<const float> at) {
    const Batch batch = loader_.at_step(steps_);
    return model_->loss_and_gradient(at, batch, grad_.span());
}

void LocalTrainer::apply_gradient(std::span<float> x, std::span<const float> g) {
    const double lr = schedule_.at(steps_);
    for (std::size_t id = 0; id < layout_.count(); ++id) {
        const Partition& p = layout_[id];
        optimizers_[id]->step(x.subspan(p.offset, p.size), g.subspan(p.offset, p.size), lr);
    }
    ++steps_;
}

EvalResult LocalTrainer::evaluate(const Dataset& data, int batch_size) {
    return model_->evaluate(params_.span(), data, batch_size);
}

}  // namespace gossamer::optim
