#pragma once
/// Local optimizers: the update a peer applies to its own parameters from its own gradient.
///
/// An optimizer acts on one span of parameters (a partition) and keeps the state of that span
/// only (momentum buffer, Adam moments, its own step count for bias correction). A model split
/// into partitions gets one optimizer per partition, all made from the same OptimizerConfig, so
/// partitions that step at different rates keep separate, correct state. The learning rate is
/// passed to every step, because it comes from a schedule and from the multirate rule (a slow
/// partition steps with k times the rate every k steps). Conventions follow torch.optim.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "gossamer/core/json.hpp"
#include "gossamer/core/state_io.hpp"

namespace gossamer::optim {

enum class OptimizerKind {
    sgd,    ///< plain, heavy-ball or Nesterov momentum; L2 weight decay added to the gradient
    adam,   ///< Adam with bias correction; L2 weight decay added to the gradient
    adamw,  ///< Adam with decoupled weight decay: p <- p (1 - lr wd) before the Adam step
};

/// "sgd", "adam" or "adamw".
std::string_view to_string(OptimizerKind kind);

/// The update rule. Fields that do not apply to `kind` must keep their defaults.
struct OptimizerConfig {
    OptimizerKind kind = OptimizerKind::sgd;
    double lr = 0.1;            ///< base learning rate (> 0); schedules scale it
    double weight_decay = 0.0;  ///< >= 0; L2 coefficient (sgd, adam) or decoupled rate (adamw)
    double momentum = 0.0;      ///< sgd: buf <- momentum buf + g, in [0, 1)
    bool nesterov = false;      ///< sgd: step along g + momentum buf (needs momentum > 0)
    double beta1 = 0.9;         ///< adam, adamw: first-moment decay, in [0, 1)
    double beta2 = 0.999;       ///< adam, adamw: second-moment decay, in [0, 1)
    double eps = 1e-8;          ///< adam, adamw: added to sqrt(v_hat), > 0
    /// Global-norm gradient clipping (every kind): before a step, the gradient it applies is
    /// scaled by min(1, clip_norm / ||g||), the norm taken over every partition that updates on
    /// that step (torch.nn.utils.clip_grad_norm_). 0 = off. Applied by LocalTrainer.
    double clip_norm = 0.0;
};

/// Throws ConfigError (path "optimizer.<key>") for a value out of range or a key that does not
/// apply to the kind.
void validate(const OptimizerConfig& config);

/// Reads an optimizer node such as
///   {"name": "sgd", "lr": 0.1, "momentum": 0.9, "nesterov": true, "weight_decay": 5e-4}
///   {"name": "adamw", "lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
///    "weight_decay": 0.01}
/// "name" and "lr" are required. Throws ConfigError naming the file and JSON path for an unknown
/// key or name, a key of another optimizer, a wrong type, or a value out of range.
OptimizerConfig parse_optimizer(const json::Node& node);

/// A stateful optimizer for one span of `size()` parameters.
class LocalOptimizer {
  public:
    virtual ~LocalOptimizer() = default;

    /// One update of `params` from `grads` with learning rate `lr` (>= 0, finite; a schedule may
    /// reach 0).
    /// Throws Error when either span's size differs from size().
    void step(std::span<float> params, std::span<const float> grads, double lr);
    /// One update with the configured base learning rate.
    void step(std::span<float> params, std::span<const float> grads) {
        step(params, grads, config_.lr);
    }

    /// Forgets the state (momentum, moments, step count), as if just constructed.
    void reset();

    std::size_t size() const { return size_; }
    /// Completed steps (Adam's bias correction uses steps() after the increment).
    std::int64_t steps() const { return steps_; }
    const OptimizerConfig& config() const { return config_; }
    /// Checkpoints: the step count and the buffers (momentum; Adam's moments), and their
    /// restore (ConfigError through the reader when the state is of another optimizer or size).
    void save(StateWriter& w) const;
    void restore(StateReader& r);

  protected:
    LocalOptimizer(const OptimizerConfig& config, std::size_t size)
        : config_(config), size_(size) {}
    /// `t` is the 1-based number of this step.
    virtual void apply(std::span<float> params, std::span<const float> grads, double lr,
                       std::int64_t t) = 0;
    virtual void clear_state() = 0;
    /// The buffers as float vectors, in a fixed order (none for plain SGD).
    virtual std::vector<std::vector<float>*> buffers() = 0;

  private:
    OptimizerConfig config_;
    std::size_t size_;
    std::int64_t steps_ = 0;
};

/// A fresh optimizer for a span of `size` parameters (state zeroed). Validates `config` first.
std::unique_ptr<LocalOptimizer> make_optimizer(const OptimizerConfig& config, std::size_t size);

}  // namespace gossamer::optim
