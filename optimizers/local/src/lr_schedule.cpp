#include "gossamer/optimizers/local/lr_schedule.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numbers>
#include <string>

#include "gossamer/core/error.hpp"

namespace gossamer::optim {
namespace {

using Fail =
    std::function<void(std::string_view key, const std::string& what, const std::string& fix)>;

std::string_view to_string(ScheduleKind kind) {
    switch (kind) {
        case ScheduleKind::constant:
            return "constant";
        case ScheduleKind::step:
            return "step";
        case ScheduleKind::cosine:
            return "cosine";
    }
    return "?";
}

// The rules shared by the programmatic constructor and the JSON reader. The key "lr" stands for
// the base learning rate, which lives in the optimizer's config rather than in the schedule's.
void check_rules(const ScheduleConfig& c, double base_lr, const Fail& fail) {
    if (!(base_lr > 0) || !std::isfinite(base_lr))
        fail("lr", fmt::format("base learning rate {} must be finite and > 0", base_lr),
             "set the optimizer's lr");
    if (c.warmup_steps < 0)
        fail("warmup_steps", fmt::format("warmup_steps {} is negative", c.warmup_steps),
             "use 0 for no warm-up");
    const ScheduleConfig defaults;
    const bool is_step = c.kind == ScheduleKind::step;
    const bool is_cosine = c.kind == ScheduleKind::cosine;
    if (!is_step && (c.step_size != defaults.step_size || c.gamma != defaults.gamma))
        fail(c.step_size != defaults.step_size ? "step_size" : "gamma",
             fmt::format("step_size and gamma do not apply to a {} schedule", to_string(c.kind)),
             "remove them or use \"schedule\": \"step\"");
    if (!is_cosine && (c.total_steps != defaults.total_steps || c.min_lr != defaults.min_lr))
        fail(c.total_steps != defaults.total_steps ? "total_steps" : "min_lr",
             fmt::format("total_steps and min_lr do not apply to a {} schedule", to_string(c.kind)),
             "remove them or use \"schedule\": \"cosine\"");
    if (is_step) {
        if (c.step_size < 1)
            fail("step_size", fmt::format("step_size {} must be >= 1", c.step_size),
                 "give the number of steps between decays, e.g. 1000");
        if (!(c.gamma > 0 && c.gamma <= 1))
            fail("gamma", fmt::format("gamma {} is outside (0, 1]", c.gamma), "use e.g. 0.1");
    }
    if (is_cosine) {
        if (c.total_steps <= c.warmup_steps)
            fail("total_steps",
                 fmt::format("total_steps {} must exceed warmup_steps {}", c.total_steps,
                             c.warmup_steps),
                 "give the length of the whole run, warm-up included");
        if (!(c.min_lr >= 0 && c.min_lr <= base_lr) || !std::isfinite(c.min_lr))
            fail("min_lr",
                 fmt::format("min_lr {} is outside [0, {}] (the base learning rate)", c.min_lr,
                             base_lr),
                 "use a floor below lr, e.g. 0");
    }
}

}  // namespace

LrSchedule::LrSchedule(const ScheduleConfig& config, double base_lr)
    : config_(config), base_lr_(base_lr) {
    check_rules(
        config, base_lr, [](std::string_view key, const std::string& what, const std::string& fix) {
            throw ConfigError("", (key == "lr" ? "optimizer." : "schedule.") + std::string(key),
                              what, fix);
        });
}

double LrSchedule::at(std::int64_t step) const {
    const std::int64_t t = std::max<std::int64_t>(step, 0);
    const std::int64_t warm = config_.warmup_steps;
    if (t < warm) {
        const double lr = base_lr_ * static_cast<double>(t + 1) / static_cast<double>(warm);
        // base x (t + 1) overflows for a base near DBL_MAX; the fraction first does not.
        return std::isfinite(lr)
                   ? lr
                   : base_lr_ * (static_cast<double>(t + 1) / static_cast<double>(warm));
    }
    const std::int64_t after = t - warm;
    switch (config_.kind) {
        case ScheduleKind::constant:
            return base_lr_;
        case ScheduleKind::step:
            return base_lr_ *
                   std::pow(config_.gamma, static_cast<double>(after / config_.step_size));
        case ScheduleKind::cosine: {
            const auto span = static_cast<double>(config_.total_steps - warm);
            const double progress = std::min(static_cast<double>(after), span) / span;
            // The factor first: (base - min) x 2 overflows to inf for a base near DBL_MAX.
            return config_.min_lr +
                   (base_lr_ - config_.min_lr) * ((1 + std::cos(std::numbers::pi * progress)) / 2);
        }
    }
    return base_lr_;
}

LrSchedule parse_schedule(const json::Node& node, double base_lr) {
    node.expect_object({"schedule", "warmup_steps", "step_size", "gamma", "total_steps", "min_lr"});
    ScheduleConfig c;
    if (auto n = node.find("schedule")) {
        const std::string kind = n->as_enum({"constant", "step", "cosine"});
        c.kind = kind == "constant" ? ScheduleKind::constant
                 : kind == "step"   ? ScheduleKind::step
                                    : ScheduleKind::cosine;
    }
    // Presence, not value, decides whether a key belongs to another kind.
    const auto reject = [&](std::string_view key, ScheduleKind owner) {
        if (c.kind == owner) return;
        if (auto n = node.find(key))
            n->fail(fmt::format("\"{}\" does not apply to a {} schedule", key, to_string(c.kind)),
                    fmt::format("remove it or use \"schedule\": \"{}\"", to_string(owner)));
    };
    reject("step_size", ScheduleKind::step);
    reject("gamma", ScheduleKind::step);
    reject("total_steps", ScheduleKind::cosine);
    reject("min_lr", ScheduleKind::cosine);

    if (auto n = node.find("warmup_steps")) c.warmup_steps = n->as_int(0);
    if (c.kind == ScheduleKind::step) {
        c.step_size = node.at("step_size").as_int(1);
        if (auto n = node.find("gamma")) c.gamma = n->as_double();
    }
    if (c.kind == ScheduleKind::cosine) {
        c.total_steps = node.at("total_steps").as_int(1);
        if (auto n = node.find("min_lr")) c.min_lr = n->as_double();
    }
    check_rules(c, base_lr,
                [&](std::string_view key, const std::string& what, const std::string& fix) {
                    if (auto n = node.find(key)) n->fail(what, fix);
                    node.fail(what, fix);
                });
    return LrSchedule(c, base_lr);
}

}  // namespace gossamer::optim
