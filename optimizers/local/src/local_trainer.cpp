#include "gossamer/optimizers/local/local_trainer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "gossamer/core/error.hpp"
#include "gossamer/core/rng.hpp"

namespace gossamer::optim {

LocalTrainer::LocalTrainer(std::unique_ptr<Model> model, PartitionLayout layout,
                           const OptimizerConfig& optimizer, LrSchedule schedule,
                           const Dataset& shard, int batch_size, std::uint64_t seed, int rank)
    : model_(std::move(model)),
      layout_(std::move(layout)),
      schedule_(std::move(schedule)),
      // Every peer starts from the same model (seed); each draws its own batch order.
      loader_(shard, batch_size, batch_seed(seed, rank), rank),
      params_(model_->parameter_count()),
      grad_(model_->parameter_count()) {
    clip_norm_ = optimizer.clip_norm;
    model_->init(params_.span(), seed);
    for (const auto& p : layout_.partitions()) {
        optimizers_.push_back(make_optimizer(optimizer, p.size));
        work_.push_back({p.name, 0, 0});
    }
    for (const auto& l : model_->layers()) layer_owner_.push_back(layout_.owner(l.offset));
    multirate_ = Multirate(layout_);
}

std::uint64_t LocalTrainer::batch_seed(std::uint64_t seed, int rank) {
    return rank == 0 ? seed : derive_seed(seed, static_cast<std::uint64_t>(rank));
}

void LocalTrainer::set_multirate(Multirate m) {
    if (!(m.layout() == layout_))
        throw Error(fmt::format("multirate rates for layout {} given to a trainer with layout {}",
                                m.layout().describe(), layout_.describe()));
    multirate_ = std::move(m);
}

LayerMask LocalTrainer::backward_mask(std::int64_t step) const {
    if (!multirate_.active() || multirate_.backward() == BackwardMode::full)
        return LayerMask::all();
    const auto layers = model_->layers();
    std::vector<bool> need(layers.size(), false);
    bool all = true;
    for (std::size_t l = 0; l < layers.size(); ++l) {
        // A layer is needed when any partition overlapping it updates on this step.
        for (std::size_t id = 0; id < layout_.count() && !need[l]; ++id) {
            const Partition& p = layout_[id];
            need[l] = p.offset < layers[l].end() && layers[l].offset < p.end() &&
                      multirate_.updates(id, step);
        }
        all = all && need[l];
    }
    return all ? LayerMask::all() : LayerMask::only(std::move(need));
}

double LocalTrainer::step() {
    const double loss = compute_gradient(params_.span());
    apply_gradient(params_.span(), grad_.span());
    return loss;
}

double LocalTrainer::compute_gradient(std::span<const float> at) {
    const Batch batch = loader_.at_step(steps_);
    const auto counters = model_->backward_macs();
    macs_before_.assign(counters.begin(), counters.end());
    const double loss = model_->loss_and_gradient(at, batch, grad_.span(), backward_mask(steps_));
    const auto after = model_->backward_macs();
    for (std::size_t l = 0; l < after.size() && l < macs_before_.size(); ++l)
        work_[layer_owner_[l]].backward_macs += after[l] - macs_before_[l];
    return loss;
}

// The factor min(1, clip / ||g||) over the partitions that update on this step, computed once
// per step (step_partition may step some partitions before apply_gradient steps the rest).
float LocalTrainer::clip_scale(std::span<const float> g) {
    if (clip_norm_ <= 0) return 1.0f;
    if (clip_scale_) return *clip_scale_;
    double sum = 0;
    for (std::size_t id = 0; id < layout_.count(); ++id) {
        if (!multirate_.updates(id, steps_)) continue;
        const Partition& p = layout_[id];
        for (const float v : g.subspan(p.offset, p.size)) sum += static_cast<double>(v) * v;
    }
    const double norm = std::sqrt(sum);
    // A non-finite norm is left alone: the divergence guard reports it, clipping would hide it.
    clip_scale_ = norm > clip_norm_ && std::isfinite(norm)
                      ? static_cast<float>(clip_norm_ / (norm + 1e-6))
                      : 1.0f;
    return *clip_scale_;
}

void LocalTrainer::step_one(std::size_t id, std::span<float> x, std::span<const float> g,
                            double lr) {
    const Partition& p = layout_[id];
    auto gp = g.subspan(p.offset, p.size);
    const float s = clip_scale(g);
    if (s != 1.0f) {
        clipped_.resize(gp.size());
        for (std::size_t i = 0; i < gp.size(); ++i) clipped_[i] = gp[i] * s;
        gp = clipped_;
    }
    optimizers_[id]->step(x.subspan(p.offset, p.size), gp, lr);
}

bool LocalTrainer::step_partition(std::size_t id, std::span<float> x, std::span<const float> g) {
    if (id >= layout_.count()) return false;
    if (stepped_.size() != layout_.count()) stepped_.assign(layout_.count(), 0);
    if (stepped_[id]) return false;
    stepped_[id] = 1;
    if (!multirate_.updates(id, steps_)) return true;
    const double k = multirate_.rate(id).period;
    step_one(id, x, g, k * schedule_.at(schedule_step_.value_or(steps_)));
    ++work_[id].updates;
    return true;
}

void LocalTrainer::apply_gradient(std::span<float> x, std::span<const float> g) {
    const double lr = schedule_.at(schedule_step_.value_or(steps_));
    schedule_step_.reset();
    for (std::size_t id = 0; id < layout_.count(); ++id) {
        if (id < stepped_.size() && stepped_[id]) continue;  // stepped ahead (step_partition)
        if (!multirate_.updates(id, steps_)) continue;
        // A step of k * h from the current gradient (Vlaar & Leimkuhler's multirate scheme).
        const double k = multirate_.rate(id).period;
        step_one(id, x, g, k * lr);
        ++work_[id].updates;
    }
    std::fill(stepped_.begin(), stepped_.end(), 0);
    clip_scale_.reset();
    ++steps_;
}

EvalResult LocalTrainer::evaluate(const Dataset& data, int batch_size) {
    return model_->evaluate(params_.span(), data, batch_size);
}

}  // namespace gossamer::optim
