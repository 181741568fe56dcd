#include "gossamer/optimizers/outer/outer_options.hpp"

#include <fmt/format.h>

#include <cmath>

#include "gossamer/core/error.hpp"

namespace gossamer::optim {
namespace {

std::string_view kind_name(OuterKind k) {
    switch (k) {
        case OuterKind::sgd:
            return "sgd";
        case OuterKind::nesterov:
            return "nesterov";
        case OuterKind::delayed_nesterov:
            return "delayed_nesterov";
    }
    return "?";
}

}  // namespace

std::string OuterOptions::describe() const {
    std::string s = timed() ? fmt::format("T={:g}s ref={} {}", seconds, reference_steps,
                                          normalize == OuterNormalize::fednova
                                              ? fmt::format("fednova max_scale={:g}", max_scale)
                                              : std::string("raw"))
                            : fmt::format("H={}", steps);
    s += fmt::format(" {} lr={:g} momentum={:g}", kind_name(kind), lr, momentum);
    if (kind == OuterKind::delayed_nesterov) s += fmt::format(" delay={}", delay);
    if (!partitions.empty()) s += fmt::format(" partitions={}", fmt::join(partitions, ","));
    return s;
}

void check_outer_values(const OuterOptions& o, const std::string& file, const std::string& prefix) {
    const auto bad = [&](const char* field, std::string what, const char* fix) {
        throw ConfigError(file, prefix + field, std::move(what), fix);
    };
    if (o.timed()) {
        if (!std::isfinite(o.seconds))
            bad("seconds", fmt::format("{:g} seconds per round must be finite", o.seconds),
                "use e.g. 2.0");
        if (o.reference_steps < 1)
            bad("reference_steps",
                "rounds by time need the common step count the peers' pseudo-gradients are "
                "rescaled to (and that sets the job's rounds)",
                "add \"reference_steps\": the inner steps a peer of mean speed takes in "
                "\"seconds\" (gossamer sim prints each peer's count), e.g. 16");
    } else {
        if (o.seconds < 0 || std::isnan(o.seconds))
            bad("seconds", fmt::format("{:g} seconds per round must be > 0", o.seconds),
                "use e.g. 2.0, or \"steps\" for rounds of a fixed step count");
        if (o.steps < 1)
            bad("steps",
                fmt::format("{} inner steps per round; a round takes at least one", o.steps),
                "use an integer >= 1, e.g. 8");
    }
    if (!(o.lr > 0) || !std::isfinite(o.lr))
        bad("lr", fmt::format("outer learning rate {:g} must be finite and > 0", o.lr),
            "use e.g. 1.0 (local SGD) or 0.7 (DiLoCo's)");
    if (!(o.momentum >= 0 && o.momentum < 1))
        bad("momentum", fmt::format("outer momentum {:g} is outside [0, 1)", o.momentum),
            "use e.g. 0 or 0.9");
    if (o.kind != OuterKind::sgd && o.momentum == 0)
        bad("momentum", "Nesterov's outer step needs momentum > 0",
            "set \"momentum\", e.g. 0.9, or use \"optimizer\": \"sgd\"");
    if (o.delay < 1)
        bad("delay",
            fmt::format("a delay of {} rounds; the momentum steps every delay >= 1 rounds",
                        o.delay),
            "use e.g. 4 (1 is nesterov)");
}

OuterOptions parse_outer_options(const json::Node& node) {
    node.expect_object({"steps", "seconds", "reference_steps", "normalize", "max_scale",
                        "optimizer", "lr", "momentum", "delay", "partitions"});
    OuterOptions o;
    const auto steps = node.find("steps");
    const auto seconds = node.find("seconds");
    if (!steps && !seconds)
        node.fail("\"steps\" (inner steps per round) or \"seconds\" (rounds by time) is missing",
                  "add \"steps\": H, e.g. 8 (1 gives today's per-step algorithm), or "
                  "\"seconds\": T with \"reference_steps\"");
    if (steps && seconds)
        seconds->fail("a round is either \"steps\" inner steps or \"seconds\" long, not both",
                      "drop one of \"steps\" and \"seconds\"");
    const std::string prefix = node.path() + ".";
    if (steps) o.steps = steps->as_int(INT64_MIN, INT64_MAX);
    if (seconds) {
        o.seconds = seconds->as_double();
        if (!(o.seconds > 0))
            seconds->fail(fmt::format("{:g} seconds per round must be > 0", o.seconds),
                          "use e.g. 2.0");
    }
    for (const char* key : {"reference_steps", "normalize", "max_scale"})
        if (auto v = node.find(key); v && !seconds)
            v->fail(fmt::format("\"{}\" belongs to rounds by time", key),
                    "add \"seconds\" (and drop \"steps\"), or drop it");
    if (auto v = node.find("reference_steps")) o.reference_steps = v->as_int(INT64_MIN, INT64_MAX);
    if (auto v = node.find("normalize"))
        o.normalize = v->as_enum({"fednova", "none"}) == "fednova" ? OuterNormalize::fednova
                                                                   : OuterNormalize::none;
    if (auto v = node.find("max_scale")) {
        o.max_scale = v->as_double();
        if (!(o.max_scale >= 1) || !std::isfinite(o.max_scale))
            v->fail(fmt::format("max_scale {:g} must be finite and >= 1", o.max_scale),
                    "use e.g. 1 (never scale a pseudo-gradient up) or 4");
    }
    if (auto v = node.find("optimizer")) {
        const std::string k = v->as_enum({"sgd", "nesterov", "delayed_nesterov"});
        o.kind = k == "sgd"        ? OuterKind::sgd
                 : k == "nesterov" ? OuterKind::nesterov
                                   : OuterKind::delayed_nesterov;
    }
    if (auto v = node.find("lr")) o.lr = v->as_double();
    if (auto v = node.find("momentum")) o.momentum = v->as_double();
    if (auto v = node.find("delay")) {
        if (o.kind != OuterKind::delayed_nesterov)
            v->fail("\"delay\" belongs to the delayed_nesterov outer optimizer",
                    "set \"optimizer\": \"delayed_nesterov\", or drop \"delay\"");
        o.delay = v->as_int(INT64_MIN, INT64_MAX);
    }
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
    check_outer_values(o, node.file(), prefix);
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
    const std::int64_t h = o.round_steps();
    return inner_steps <= 0 || h < 1 ? 0 : (inner_steps + h - 1) / h;
}

}  // namespace gossamer::optim
