#pragma once
/// Local training: one model copy, its parameters, one optimizer per partition, a learning-rate
/// schedule and the mini-batches of one shard. `gossamer train` runs it alone; the simulator and
/// real peers run one per peer and mix its parameters between steps.
///
/// Multirate (set_multirate, multirate.hpp): partition p with period k updates on steps s with
/// (s + 1) % k == 0 at rate k * lr(s); with BackwardMode::skip the gradient of step s is computed
/// only for the layers of partitions that update on s (LayerMask), the rest keep stale values
/// that no update reads. work() counts updates and backward multiply-adds per partition.
///
/// Thread safety: one thread at a time (the model keeps scratch buffers).

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "gossamer/core/dataset.hpp"
#include "gossamer/core/model.hpp"
#include "gossamer/core/params.hpp"
#include "gossamer/core/partition.hpp"
#include "gossamer/core/sharding.hpp"
#include "gossamer/optimizers/local/local_optimizer.hpp"
#include "gossamer/optimizers/local/lr_schedule.hpp"
#include "gossamer/optimizers/local/multirate.hpp"
#include "gossamer/optimizers/local/worker.hpp"

namespace gossamer::optim {

class LocalTrainer final : public proto::LocalWorker {
  public:
    /// @param shard  the samples this trainer draws batches from; must outlive the trainer
    /// @param seed   initialises the parameters (the same on every peer) and orders the batches
    ///               (rank 0 with `seed` itself, rank r with derive_seed(seed, r))
    /// Throws ConfigError when the batch is larger than the shard.
    LocalTrainer(std::unique_ptr<Model> model, PartitionLayout layout,
                 const OptimizerConfig& optimizer, LrSchedule schedule, const Dataset& shard,
                 int batch_size, std::uint64_t seed, int rank = 0);

    /// The seed of rank `rank`'s batch order (BatchLoader's): `seed` for rank 0, else
    /// derive_seed(seed, rank). The Python bindings hand the same order to reference scripts.
    static std::uint64_t batch_seed(std::uint64_t seed, int rank);

    /// One local step: the gradient of the next batch, then one optimizer step per partition.
    /// Returns the batch's mean loss (computed before the update). NaN or infinite losses are
    /// returned as they are: the caller decides to stop.
    double step();

    // LocalWorker: the same step split in two, so that a protocol can mix in between.
    std::size_t size() const override { return params_.size(); }
    bool math() const override { return true; }
    std::span<float> params() override { return params_.span(); }
    /// The gradient of the next batch (the batch of step steps()) at `at`.
    double compute_gradient(std::span<const float> at) override;
    std::span<const float> gradient() const override { return grad_.span(); }
    /// One optimizer step per partition on `x` at the rate of step steps(); increments steps().
    void apply_gradient(std::span<float> x, std::span<const float> g) override;
    std::int64_t steps() const override { return steps_; }
    /// The rates in use (nullptr until set_multirate with active rates).
    const optim::Multirate* multirate() const override {
        return multirate_.active() ? &multirate_ : nullptr;
    }
    std::span<const proto::PartitionWork> work() const override { return work_; }
    /// The layout: partition_ready may declare each of its partitions ready.
    const PartitionLayout* partitions() const override { return &layout_; }
    /// Partition id's optimizer step of the running step, ahead of apply_gradient (which then
    /// skips it); the same arithmetic as in apply_gradient. False if already stepped.
    bool step_partition(std::size_t id, std::span<float> x, std::span<const float> g) override;
    /// Checkpoints (trainer_state.cpp): parameters, step count, work, optimizer state.
    bool checkpointable() const override { return true; }
    void save_state(StateWriter& w) const override;
    void restore_state(StateReader& r) override;
    void set_schedule_step(std::int64_t step) override { schedule_step_ = step; }
    /// Elastic jobs: the step count (learning rate, batch order) becomes `step`.
    void enter_at(std::int64_t step) override { steps_ = step; }

    /// Trains with these rates from now on. Throws Error unless m.layout() equals layout().
    void set_multirate(Multirate m);
    /// The layers the gradient of step `step` computes (all, or those of updating partitions).
    LayerMask backward_mask(std::int64_t step) const;

    /// Mean loss and accuracy of the current parameters on `data`.
    EvalResult evaluate(const Dataset& data, int batch_size = 1000);

    std::int64_t batches_per_epoch() const { return loader_.batches_per_epoch(); }
    int batch_size() const { return loader_.batch_size(); }
    /// The learning rate the next step will use.
    double lr() const { return schedule_.at(steps_); }
    /// The schedule's learning rate at step `step`.
    double lr_at(std::int64_t step) const { return schedule_.at(step); }
    std::span<const float> params() const noexcept { return params_.span(); }
    const PartitionLayout& layout() const noexcept { return layout_; }
    Model& model() noexcept { return *model_; }

  private:
    float clip_scale(std::span<const float> g);
    void step_one(std::size_t id, std::span<float> x, std::span<const float> g, double lr);
    std::unique_ptr<Model> model_;
    PartitionLayout layout_;
    LrSchedule schedule_;
    BatchLoader loader_;
    ParamVector params_, grad_;
    std::vector<std::unique_ptr<LocalOptimizer>> optimizers_;  // one per partition
    std::int64_t steps_ = 0;
    std::optional<std::int64_t> schedule_step_;  // set_schedule_step: the next step's rate
    Multirate multirate_;
    std::vector<proto::PartitionWork> work_;  // by partition id
    std::vector<std::size_t> layer_owner_;    // partition id of each layer's first parameter
    std::vector<std::uint64_t> macs_before_;  // scratch: the model's counters before a pass
    std::vector<char> stepped_;               // step_partition: stepped ahead in this step
    double clip_norm_ = 0;                    // OptimizerConfig::clip_norm
    std::optional<float> clip_scale_;         // this step's clipping factor, once computed
    std::vector<float> clipped_;              // a partition's scaled gradient
};

}  // namespace gossamer::optim
