#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <span>
#include <string>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/local/local_optimizer.hpp"

namespace gossamer::optim {
namespace {

// Reports a bad value of `key`; never returns. Lets the programmatic and the JSON paths share
// one set of rules while each names the value its own way.
using Fail =
    std::function<void(std::string_view key, const std::string& what, const std::string& fix)>;

constexpr std::string_view kSgdOnly[] = {"momentum", "nesterov"};
constexpr std::string_view kAdamOnly[] = {"beta1", "beta2", "eps"};

void check_rules(const OptimizerConfig& c, const Fail& fail) {
    if (!(c.lr > 0) || !std::isfinite(c.lr))
        fail("lr", fmt::format("learning rate {} must be finite and > 0", c.lr),
             "use a positive learning rate such as 0.1 (sgd) or 1e-3 (adam)");
    if (!(c.weight_decay >= 0) || !std::isfinite(c.weight_decay))
        fail("weight_decay", fmt::format("weight decay {} must be finite and >= 0", c.weight_decay),
             "use 0 to turn it off, or a small value such as 5e-4");
    if (!(c.momentum >= 0 && c.momentum < 1))
        fail("momentum", fmt::format("momentum {} is outside [0, 1)", c.momentum), "use e.g. 0.9");
    if (c.nesterov && !(c.momentum > 0))
        fail("nesterov", "Nesterov momentum needs momentum > 0", "set momentum, e.g. 0.9");
    if (!(c.beta1 >= 0 && c.beta1 < 1))
        fail("beta1", fmt::format("beta1 {} is outside [0, 1)", c.beta1), "use e.g. 0.9");
    if (!(c.beta2 >= 0 && c.beta2 < 1))
        fail("beta2", fmt::format("beta2 {} is outside [0, 1)", c.beta2), "use e.g. 0.999");
    if (!(c.eps > 0) || !std::isfinite(c.eps))
        fail("eps", fmt::format("eps {} must be finite and > 0", c.eps), "use e.g. 1e-8");
    if (!(c.clip_norm >= 0) || !std::isfinite(c.clip_norm))
        fail("clip_norm", fmt::format("clip_norm {} must be finite and >= 0", c.clip_norm),
             "use 0 (no clipping) or a global gradient norm such as 1.0");
}

std::string misplaced(std::string_view key, OptimizerKind kind) {
    return fmt::format("\"{}\" does not apply to {}", key, to_string(kind));
}

std::string misplaced_fix(std::string_view key) {
    if (key == "momentum" || key == "nesterov")
        return "remove it; it applies to sgd (Adam's momentum is beta1)";
    return "remove it; it applies to adam and adamw";
}

}  // namespace

void validate(const OptimizerConfig& config) {
    const Fail fail = [](std::string_view key, const std::string& what, const std::string& fix) {
        throw ConfigError("", "optimizer." + std::string(key), what, fix);
    };
    check_rules(config, fail);
    const OptimizerConfig defaults;
    if (config.kind == OptimizerKind::sgd) {
        if (config.beta1 != defaults.beta1 || config.beta2 != defaults.beta2 ||
            config.eps != defaults.eps)
            fail(config.beta1 != defaults.beta1   ? "beta1"
                 : config.beta2 != defaults.beta2 ? "beta2"
                                                  : "eps",
                 "Adam settings do not apply to sgd", misplaced_fix("beta1"));
    } else if (config.momentum != 0 || config.nesterov) {
        fail(config.momentum != 0 ? "momentum" : "nesterov",
             misplaced(config.momentum != 0 ? "momentum" : "nesterov", config.kind),
             misplaced_fix("momentum"));
    }
}

OptimizerConfig parse_optimizer(const json::Node& node) {
    node.expect_object({"name", "lr", "weight_decay", "momentum", "nesterov", "beta1", "beta2",
                        "eps", "clip_norm"});
    OptimizerConfig c;
    const std::string name = node.at("name").as_enum({"sgd", "adam", "adamw"});
    c.kind = name == "sgd"    ? OptimizerKind::sgd
             : name == "adam" ? OptimizerKind::adam
                              : OptimizerKind::adamw;
    using Keys = std::span<const std::string_view>;
    for (auto key : c.kind == OptimizerKind::sgd ? Keys(kAdamOnly) : Keys(kSgdOnly))
        if (auto n = node.find(key)) n->fail(misplaced(key, c.kind), misplaced_fix(key));

    c.lr = node.at("lr").as_double();
    if (auto n = node.find("weight_decay")) c.weight_decay = n->as_double();
    if (auto n = node.find("momentum")) c.momentum = n->as_double();
    if (auto n = node.find("nesterov")) c.nesterov = n->as_bool();
    if (auto n = node.find("beta1")) c.beta1 = n->as_double();
    if (auto n = node.find("beta2")) c.beta2 = n->as_double();
    if (auto n = node.find("eps")) c.eps = n->as_double();
    if (auto n = node.find("clip_norm")) c.clip_norm = n->as_double();

    check_rules(c, [&](std::string_view key, const std::string& what, const std::string& fix) {
        if (auto n = node.find(key)) n->fail(what, fix);
        node.fail(what, fix);
    });
    return c;
}

}  // namespace gossamer::optim
