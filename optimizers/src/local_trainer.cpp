#include "gossamer/optimizers/local_trainer.hpp"

namespace gossamer::optim {

LocalTrainer::LocalTrainer(std::unique_ptr<Model> model, PartitionLayout layout,
                           const OptimizerConfig& optimizer, LrSchedule schedule,
                           const Dataset& shard, int batch_size, std::uint64_t seed, int rank)
    : model_(std::move(model)),
      layout_(std::move(layout)),
      schedule_(std::move(schedule)),
      loader_(shard, batch_size, seed, rank),
      params_(model_->parameter_count()),
      grad_(model_->parameter_count()) {
    model_->init(params_.span(), seed);
    for (const auto& p : layout_.partitions())
        optimizers_.push_back(make_optimizer(optimizer, p.size));
}

double LocalTrainer::step() {
    const Batch batch = loader_.at_step(steps_);
    const double loss = model_->loss_and_gradient(params_.span(), batch, grad_.span());
    const double lr = schedule_.at(steps_);
    auto x = params_.span();
    auto g = grad_.span();
    for (std::size_t id = 0; id < layout_.count(); ++id) {
        const Partition& p = layout_[id];
        optimizers_[id]->step(x.subspan(p.offset, p.size), g.subspan(p.offset, p.size), lr);
    }
    ++steps_;
    return loss;
}

EvalResult LocalTrainer::evaluate(const Dataset& data, int batch_size) {
    return model_->evaluate(params_.span(), data, batch_size);
}

}  // namespace gossamer::optim
