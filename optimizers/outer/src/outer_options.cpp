#include "gossamer/optimizers/outer/outer_options.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "gossamer/core/error.hpp"

namespace gossamer::optim {

namespace {

// H must be a multiple of k: every fragment syncs once a round, at its own sub-round.
void check_fragments_divide(const json::Node& node, const OuterOptions& o) {
    if (o.fragments > 0 && o.steps % o.fragments != 0)
        node.at("fragments")
            .fail(fmt::format("{} fragments do not divide a round of {} inner steps (\"steps\"); "
                              "each fragment syncs on its own sub-round of steps / fragments",
                              o.fragments, o.steps),
                  fmt::format("make \"steps\" a multiple of {}, e.g. {}", o.fragments,
                              o.fragments * std::max<std::int64_t>(1, o.steps / o.fragments + 1)));
}

// With one fragment an update merged a sub-round late would land as the next pseudo-gradient
// is taken, against an anchor the inner point has not met.
void check_overlap(const json::Node& node, OuterOptions& o) {
    if (o.fragments != 1 || o.overlap == 0) return;
    if (!node.find("overlap")) {
        o.overlap = 0;
        return;
    }
    node.at("overlap").fail(
        "overlap 1 needs 2 fragments or more (with one, the update would land as the next "
        "pseudo-gradient is taken)",
        "use \"overlap\": 0, or 2 fragments or more");
}

// "fragments", "alpha", "overlap" (docs/algorithms/outer.md, "Streaming").
void parse_streaming(const json::Node& node, OuterOptions& o) {
    const auto f = node.find("fragments");
    if (!f) {
        for (const char* key : {"alpha", "overlap"})
            if (auto v = node.find(key))
                v->fail(fmt::format("\"{}\" is an option of streaming fragments", key),
                        "add \"fragments\": k (e.g. 4), or drop it");
        return;
    }
    if (f->is_string()) {
        if (f->as_string() != "partitions")
            f->fail("expected a number of equal slices or \"partitions\"",
                    "use e.g. 4, or \"partitions\" (the config's named partitions)");
        o.fragments_are_partitions = true;
        o.fragments = 1;  // the count comes with the partitions (find_outer_options)
    } else {
        o.fragments = f->as_int(INT64_MIN, INT64_MAX);
        if (o.fragments < 1)
            f->fail(fmt::format("{} fragments; the model is at least one", o.fragments),
                    "use an integer >= 1 that divides \"steps\", e.g. 4");
        check_fragments_divide(node, o);
    }
    if (auto v = node.find("alpha")) {
        o.alpha = v->as_double();
        if (!(o.alpha >= 0 && o.alpha < 1))
            v->fail(fmt::format("alpha {:g} is outside [0, 1)", o.alpha),
                    "use e.g. 0.5 (Streaming DiLoCo's) or 0 (the new anchor only)");
    }
    o.overlap = o.fragments_are_partitions || o.fragments >= 2 ? 1 : 0;
    if (auto v = node.find("overlap")) {
        o.overlap = v->as_int(INT64_MIN, INT64_MAX);
        if (o.overlap < 0 || o.overlap > 1)
            v->fail(fmt::format("overlap {} sub-rounds; it is 0 or 1", o.overlap),
                    "use 1 (the sync travels during the next sub-round) or 0");
    }
    if (!o.fragments_are_partitions) check_overlap(node, o);
}

}  // namespace

std::string OuterOptions::describe() const {
    std::string s = fmt::format("H={} {} lr={:g} momentum={:g}", steps,
                                kind == OuterKind::nesterov ? "nesterov" : "sgd", lr, momentum);
    if (!partitions.empty()) s += fmt::format(" partitions={}", fmt::join(partitions, ","));
    if (fragments > 0)
        s += fmt::format(" fragments={}{} alpha={:g} overlap={}", fragments,
                         fragments_are_partitions ? "(partitions)" : "", alpha, overlap);
    return s;
}

OuterOptions parse_outer_options(const json::Node& node) {
    node.expect_object(
        {"steps", "optimizer", "lr", "momentum", "partitions", "fragments", "alpha", "overlap"});
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
    parse_streaming(node, o);
    return o;
}

std::optional<OuterOptions> find_outer_options(const json::Node& root) {
    auto n = root.find("outer");
    if (!n) return std::nullopt;
    OuterOptions o = parse_outer_options(*n);
    if (o.fragments_are_partitions) {
        const auto parts = root.find("partitions");
        if (!parts || !parts->is_object())
            n->at("fragments")
                .fail("\"fragments\": \"partitions\" needs the config's \"partitions\" section",
                      "add \"partitions\": {\"a\": [...], \"b\": [\"*\"]}, or give a number of "
                      "equal slices, e.g. \"fragments\": 4");
        o.fragments = static_cast<std::int64_t>(parts->value().size());
        check_fragments_divide(*n, o);
        check_overlap(*n, o);
    }
    return o;
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
    const std::int64_t per = o.step_inner_steps();
    return inner_steps <= 0 ? 0 : (inner_steps + per - 1) / per;
}

}  // namespace gossamer::optim
