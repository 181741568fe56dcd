#pragma once
/// The local computation a protocol drives (LocalWorker) and the cost-only stand-in.
#include <cstdint>
#include <span>
#include <string>

#include "gossamer/core/partition.hpp"
#include "gossamer/core/state_io.hpp"
#include "gossamer/optimizers/local/multirate.hpp"

namespace gossamer::proto {

/// Seconds: virtual time in the simulator, steady-clock time in real peers.
using Time = double;

class Device;  // gossamer/optimizers/protocol/device.hpp

/// Work one partition has done on a worker: optimizer steps taken and backward multiply-adds
/// of its layers (Model::backward_macs; 0 when the model does not count them).
struct PartitionWork {
    std::string name;
    std::int64_t updates = 0;
    std::uint64_t backward_macs = 0;
};

/// The local computation a protocol drives: one model copy and its optimizer. Implemented by
/// optim::LocalTrainer (real math) and by CostOnlyWorker (no values, for scale studies).
class LocalWorker {
  public:
    virtual ~LocalWorker() = default;
    /// Parameters in the model (the length of x).
    virtual std::size_t size() const = 0;
    /// False in cost-only mode: params() and gradient() are empty and nothing is computed.
    virtual bool math() const = 0;
    /// x: the peer's parameters.
    virtual std::span<float> params() = 0;
    /// Compute side: the gradient at `at` (size() values) into gradient(); returns the loss.
    virtual double compute_gradient(std::span<const float> at) = 0;
    virtual std::span<const float> gradient() const = 0;
    /// Protocol side: one optimizer step on `x` with gradient `g` at the schedule's rate for the
    /// worker's step count, which it then increments.
    virtual void apply_gradient(std::span<float> x, std::span<const float> g) = 0;
    /// Optimizer steps applied so far.
    virtual std::int64_t steps() const = 0;
    /// Inner steps the next compute_gradient takes: 1, except under the outer layer
    /// (optim::OuterWorker), where one call is a round of up to H steps. Drivers charge (sim)
    /// and pad (peers) that many steps of compute.
    virtual std::int64_t steps_per_gradient() const { return 1; }
    /// Inner steps taken so far (steps() except under the outer layer).
    virtual std::int64_t inner_steps() const { return steps(); }
    /// Rounds by time (the outer layer, "outer": {"seconds": T}): the seconds the next round
    /// lasts, or 0 when rounds have a fixed step count. Drivers then count the inner steps that
    /// fit in it (their step times: the simulator's compute model, a peer's padding and measured
    /// steps) and say so with plan_round before they read steps_per_gradient().
    virtual double round_seconds() const { return 0.0; }
    /// Rounds by time: the next round takes `steps` inner steps (bounded by the worker).
    virtual void plan_round(std::int64_t) {}
    /// Rounds by time: the next apply_gradient (and its step_partition calls) takes the
    /// learning rate of the schedule at `step` instead of at steps(); once. Workers without a
    /// schedule ignore it.
    virtual void set_schedule_step(std::int64_t) {}
    /// True for the outer layer: a compute_gradient call is a round (steps_per_gradient()
    /// inner steps). Its inner counters change only inside compute_gradient and between
    /// steps, so a compute thread may read them before it computes.
    virtual bool takes_rounds() const { return false; }
    /// The multirate rates the worker trains with, or nullptr (every partition, every step).
    /// Protocols that gossip per partition (dpsgd) follow their gossip periods.
    virtual const optim::Multirate* multirate() const { return nullptr; }
    /// Per-partition work so far, by partition id; empty when the worker keeps none.
    virtual std::span<const PartitionWork> work() const { return {}; }
    /// Where params() and gradient() live: nullptr for host memory, else the device that holds
    /// them (docs/operations/gpu.md). Every protocol then keeps its own vectors on that device and
    /// does its vector work there.
    virtual Device* device() const { return nullptr; }
    /// The partitions (groups of layers, by offset) a compute side may declare ready one by one
    /// during a step (Protocol::partition_ready), or nullptr when it declares none.
    virtual const PartitionLayout* partitions() const { return nullptr; }
    /// Protocol side, after partition_ready(id) in the running step: partition id's part of
    /// that step's optimizer step on x (g: the whole gradient), at the rate of the step count,
    /// which it leaves alone; apply_gradient then steps only the partitions not stepped so, and
    /// counts the step. False when the worker cannot step one partition alone (nothing done).
    virtual bool step_partition(std::size_t, std::span<float>, std::span<const float>) {
        return false;
    }
    /// Checkpoints (docs/operations/checkpoint.md): whether save_state/restore_state keep this
    /// worker's whole state. False by default (device workers); resume is then refused.
    virtual bool checkpointable() const { return false; }
    /// x, the optimizer state and the step counters (the batch order and learning rate follow
    /// from the step count). Called between steps only.
    virtual void save_state(StateWriter&) const {}
    /// Restores what save_state wrote; throws ConfigError (StateReader) when it does not fit.
    virtual void restore_state(StateReader&) {}
    /// Elastic jobs (Protocol::join): a peer entering a running job takes the job's step count,
    /// so that its learning rate and batch order are those of step `step` from now on.
    virtual void enter_at(std::int64_t) {}
};

/// A worker with no values: every call is free. Message sizes still count size() floats.
class CostOnlyWorker final : public LocalWorker {
  public:
    explicit CostOnlyWorker(std::size_t size) : size_(size) {}
    std::size_t size() const override { return size_; }
    bool math() const override { return false; }
    std::span<float> params() override { return {}; }
    double compute_gradient(std::span<const float>) override { return 0.0; }
    std::span<const float> gradient() const override { return {}; }
    void apply_gradient(std::span<float>, std::span<const float>) override { ++steps_; }
    std::int64_t steps() const override { return steps_; }
    bool checkpointable() const override { return true; }
    void save_state(StateWriter& w) const override { w.i64(steps_); }
    void restore_state(StateReader& r) override { steps_ = r.i64("worker steps"); }
    void enter_at(std::int64_t step) override { steps_ = step; }

  private:
    std::size_t size_;
    std::int64_t steps_ = 0;
};

}  // namespace gossamer::proto
