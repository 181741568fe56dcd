// The async protocol's options (async_gossip.hpp, docs/algorithms/async.md).
#include <fmt/format.h>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocols/async/async_gossip.hpp"

namespace gossamer::proto {
namespace {

double checked_double(const json::Node& node, double lo, double hi, bool open_lo,
                      const char* range) {
    const double v = node.as_double();
    if (v > hi || v < lo || (open_lo && v == lo)) node.fail(fmt::format("must be in {}", range));
    return v;
}

}  // namespace

AsyncOptions parse_async_options(const json::Node* options) {
    AsyncOptions o;
    if (!options) return o;
    options->expect_object(
        {"targets",         "straggler_aware",     "beta",         "base_self", "target_power",
         "edge_bound",      "rate_window",         "report_every", "balance",   "step",
         "follow_schedule", "deadline_percentile", "deadline_cap", "seed",      "outbox",
         "silence",         "silence_factor",      "chunk_bytes",  "links",     "link_power"});
    if (auto v = options->find("targets")) o.targets = static_cast<int>(v->as_int(1, 1024));
    if (auto v = options->find("straggler_aware")) o.straggler_aware = v->as_bool();
    if (auto v = options->find("beta")) o.beta = checked_double(*v, 0, 100, true, "(0, 100]");
    if (auto v = options->find("base_self")) {
        const double b = checked_double(*v, 0, 1, true, "(0, 1)");
        if (b == 1) v->fail("must be in (0, 1)", "a peer must push some of its mass");
        o.base_self = b;
    }
    if (auto v = options->find("target_power"))
        o.target_power = checked_double(*v, 0, 16, false, "[0, 16]");
    if (auto v = options->find("edge_bound")) o.edge_bound = v->as_int(1, 1'000'000);
    if (auto v = options->find("rate_window")) o.rate_window = static_cast<int>(v->as_int(2, 4096));
    if (auto v = options->find("report_every"))
        o.report_every = static_cast<int>(v->as_int(1, 1'000'000));
    if (auto v = options->find("balance")) o.balance = v->as_bool();
    if (auto v = options->find("follow_schedule")) o.follow_schedule = v->as_bool();
    if (auto v = options->find("step"))
        o.step = v->as_enum({"debiased", "numerator"}) == "debiased" ? AsyncStep::debiased
                                                                     : AsyncStep::numerator;
    if (auto v = options->find("deadline_percentile"))
        o.deadline_percentile = checked_double(*v, 0, 1, true, "(0, 1]");
    if (auto v = options->find("deadline_cap"))
        o.deadline_cap = checked_double(*v, 0, 1e9, true, "(0, 1e9]");
    if (auto v = options->find("seed")) o.seed = static_cast<std::uint64_t>(v->as_int(0));
    if (auto v = options->find("outbox")) o.outbox = v->as_bool();
    if (auto v = options->find("silence"))
        o.silence = checked_double(*v, 0, 1e9, false, "[0, 1e9]");
    if (auto v = options->find("silence_factor"))
        o.silence_factor = checked_double(*v, 1, 1e9, false, "[1, 1e9]");
    if (auto v = options->find("chunk_bytes")) o.chunk_bytes = parse_chunk_bytes(*v);
    if (auto v = options->find("links")) o.link_aware = v->as_enum({"off", "aware"}) == "aware";
    if (auto v = options->find("link_power"))
        o.link_power = checked_double(*v, 0, 16, false, "[0, 16]");
    if (o.link_aware) {
        // A slow edge is pushed to less often, and what is pushed while it is busy adds up in
        // its outbox: without one, the transport's queue would grow instead.
        if (auto v = options->find("outbox"); v && !o.outbox)
            v->fail("must be true with \"links\": \"aware\"",
                    "drop \"outbox\": false (link-aware async keeps one share in flight per "
                    "edge)");
        o.outbox = true;
    }
    return o;
}

}  // namespace gossamer::proto
