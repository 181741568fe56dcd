#pragma once
/// Learning-rate schedules: lr(t) for optimizer step t = 0, 1, 2, ...
///
/// A schedule has an optional linear warm-up of W steps, lr(t) = base (t + 1) / W for t < W,
/// then runs its shape on t' = t - W:
///   constant  lr = base
///   step      lr = base * gamma^floor(t' / step_size)
///   cosine    lr = min_lr + (base - min_lr) (1 + cos(pi min(t', T - W) / (T - W))) / 2, where
///             T = total_steps counts the whole run, warm-up included; lr stays at min_lr after T.

#include <cstdint>

#include "gossamer/core/json.hpp"

namespace gossamer::optim {

enum class ScheduleKind { constant, step, cosine };

struct ScheduleConfig {
    ScheduleKind kind = ScheduleKind::constant;
    std::int64_t warmup_steps = 0;  ///< W >= 0; 0 = no warm-up
    std::int64_t step_size = 0;     ///< step: decay every step_size steps, >= 1
    double gamma = 0.1;             ///< step: factor per decay, in (0, 1]
    std::int64_t total_steps = 0;   ///< cosine: T > warmup_steps
    double min_lr = 0.0;            ///< cosine: the floor, 0 <= min_lr <= base lr
};

/// A schedule bound to a base learning rate. Cheap to copy; pure.
class LrSchedule {
  public:
    /// Throws ConfigError (path "schedule.<key>") for an invalid config, a base lr that is not
    /// finite and > 0, or fields set that do not apply to the kind.
    LrSchedule(const ScheduleConfig& config, double base_lr);

    /// The learning rate of step `step` (>= 0; negative steps count as 0).
    double at(std::int64_t step) const;

    double base_lr() const { return base_lr_; }
    const ScheduleConfig& config() const { return config_; }

  private:
    ScheduleConfig config_;
    double base_lr_;
};

/// Reads a schedule node, e.g. {"schedule": "cosine", "warmup_steps": 100, "total_steps": 5000,
/// "min_lr": 1e-4} or {"schedule": "step", "step_size": 1000, "gamma": 0.5}. "schedule" defaults
/// to "constant"; step needs "step_size" and cosine "total_steps". `base_lr` is the optimizer's
/// lr (min_lr may not exceed it). Throws ConfigError naming the file and JSON path for an unknown
/// key or kind, a key of another kind, a wrong type, or a value out of range.
LrSchedule parse_schedule(const json::Node& node, double base_lr);

}  // namespace gossamer::optim
