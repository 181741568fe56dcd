#include "gossamer/optimizers/outer/outer_options.hpp"

#include <fmt/format.h>

#include <cmath>

#include "gossamer/core/error.hpp"

namespace gossamer::optim {

std::string OuterOptions::describe() const {
    std::string s = fmt::format("H={} {} lr={:g} momentum={:g}", steps,
                                kind == OuterKind::nesterov ? "nesterov" : "sgd", lr, momentum);
    if (!partitions.empty()) s += fmt::format(" partitions={}", fmt::join(partitions, ","));
    return s;
}

OuterOptions parse_outer_options(const json::Node& node) {
    node.expect_object({"steps", "optimizer", "lr", "momentum", "partitions"});
    OuterOptions o;
    const auto steps = node.find("steps");
    if (!steps)
        node.fail("\"steps\" (inner steps per round) is missing",
                  "add \"steps\": H, e.g. 8 (1 gives today's per-step algorithm)");
    o.steps = steps->as_int(INT64_MIN, INT64_MAX);
    if (o.steps < 1)
        steps->fail(fmt::format("{} inner steps per round; a round takes at least one", o.steps),
                    "use an integer >= 1, e.g. 8");
    if (auto v = node.find("optimizer"))
        o.kind = v->as_enum({"sgd", "nesterov"}) == "sgd" ? OuterKind::sgd : OuterKind::nesterov;
    if (auto v = node.find("lr")) {
        o.lr = v->as_double();
        if (!(o.lr > 0) || !std::isfinite(o.lr))
            v->fail(fmt::format("outer learning rate {:g} must be finite and > 0", o.lr),
                    "use e.g. 1.0 (local SGD) or 0.7 (DiLoCo's)");
    }
    if (auto v = node.find("momentum")) {
        o.momentum = v->as_double();
        if (!(o.momentum >= 0 && o.momentum < 1))
            v->fail(fmt::format("outer momentum {:g} is outside [0, 1)", o.momentum),
                    "use e.g. 0 or 0.9");
    }
    if (o.kind == OuterKind::nesterov && o.momentum == 0)
        node.fail("Nesterov's outer step needs momentum > 0",
                  "set \"momentum\", e.g. 0.9, or use \"optimizer\": \"sgd\"");
    if (auto v = node.find("partitions")) {
        v->expect_array(1);
        for (const auto& e : v->elements()) {
            std::string name = e.as_string();
            for (const auto& seen : o.partitions)
                if (seen == name)
                    e.fail(fmt::format("partition \"{}\" is named twice", name),
                           "name each partition once");
            o.partitions.push_back(std::move(name));
        }
    }
    return o;
}

std::optional<OuterOptions> find_outer_options(const json::Node& root) {
    if (auto n = root.find("outer")) return parse_outer_options(*n);
    return std::nullopt;
}

void check_outer_partitions(const OuterOptions& o, const PartitionLayout* layout,
                            const std::string& config_file) {
    for (const std::string& name : o.partitions)
        if (!layout || !layout->find(name))
            throw ConfigError(config_file, "outer.partitions",
                              fmt::format("no partition \"{}\"{}", name,
                                          layout ? " in " + layout->describe() : ""),
                              "name partitions of \"partitions\" (or drop the list: all)");
}

std::int64_t outer_rounds(std::int64_t inner_steps, const OuterOptions& o) {
    return inner_steps <= 0 ? 0 : (inner_steps + o.steps - 1) / o.steps;
}

}  // namespace gossamer::optim
