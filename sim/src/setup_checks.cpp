#include "gossamer/sim/setup_checks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "gossamer/core/error.hpp"
#include "gossamer/core/memory.hpp"
#include "gossamer/core/units.hpp"
#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/optimizers/protocol/protocol.hpp"
#include "gossamer/optimizers/protocol/registry.hpp"
#include "gossamer/optimizers/protocols/choco/choco.hpp"
#include "gossamer/optimizers/protocols/dpsgd/dpsgd.hpp"
#include "gossamer/optimizers/protocols/sgp/sgp.hpp"
#include "gossamer/sim/event_queue.hpp"

namespace gossamer::sim {
namespace {

// The largest in-degree over one period of the schedule (at most 64 rounds of a random one).
int max_in_degree(const topology::Schedule& t) {
    const std::int64_t rounds = std::min<std::int64_t>(t.period().value_or(64), 64);
    int most = 0;
    for (std::int64_t r = 0; r < rounds; ++r) {
        const auto round = t.at(r);
        for (int i = 0; i < t.n(); ++i) most = std::max(most, round->graph.in_degree(i));
    }
    return most;
}

// The slowest rate any full model can get: the least link bandwidth, uplink or downlink; and
// the largest latency.
std::pair<double, double> slowest_link(const Cluster& c) {
    double rate = c.default_link.bandwidth, latency = c.default_link.latency;
    for (const auto& [pair, link] : c.links) {
        rate = std::min(rate, link.bandwidth);
        latency = std::max(latency, link.latency);
    }
    for (const auto& p : c.peers) rate = std::min({rate, p.uplink, p.downlink});
    return {rate, latency};
}

// dpsgd follows churn without delay, reweight, partition_ready and multirate (dpsgd_elastic.cpp).
void check_dpsgd_churn(const SimSetup& s, const SizeOrigin& origin) {
    if (s.algorithm != "dpsgd") return;
    const json::Node* options = s.options ? &*s.options : nullptr;
    const auto o = proto::parse_dpsgd_options(options);
    const char* key = o.delay > 0         ? "delay"
                      : o.reweight        ? "reweight"
                      : o.partition_ready ? "partition_ready"
                                          : nullptr;
    if (key)
        throw ConfigError(origin.config_file, options->at(key).path(),
                          fmt::format("algorithm dpsgd with {} cannot join, leave or rejoin a "
                                      "running job yet, and the cluster {} has churn",
                                      key, s.cluster->source),
                          fmt::format("drop \"{}\", or the cluster's join_at, leave_at and "
                                      "rejoin_at (docs/operations/elastic.md)",
                                      key));
    if (s.config && json::Node(s.config->doc).has("multirate"))
        throw ConfigError(origin.config_file, "multirate",
                          fmt::format("algorithm dpsgd with multirate partitions cannot join, "
                                      "leave or rejoin a running job yet, and the cluster {} has "
                                      "churn",
                                      s.cluster->source),
                          "drop \"multirate\", or the cluster's join_at, leave_at and rejoin_at "
                          "(docs/operations/elastic.md)");
}

// The least latency of any link: the default and every override.
Time least_latency(const Cluster& c) {
    Time least = c.default_link.latency;
    for (const auto& [pair, link] : c.links) least = std::min(least, link.latency);
    return least;
}

// Seconds each step waits for messages at least, for the algorithms whose every step does at
// their default options; 0 where options or multirate partitions may relax it, and for the
// wait-free ones (async) and the others.
Time wait_per_step(const SimSetup& s) {
    if (!s.cluster || !s.topology) return 0;
    if (s.config && json::Node(s.config->doc).has("multirate")) return 0;
    const bool defaults = !s.options || (s.options->is_object() && s.options->value().empty());
    const Time latency = least_latency(*s.cluster);
    if (s.algorithm == "sgp") {
        // A peer may run `staleness` rounds ahead of what it has absorbed.
        const auto o = proto::parse_sgp_options(s.options ? &*s.options : nullptr);
        return latency / static_cast<double>(o.staleness + 1);
    }
    if (!defaults) return 0;
    if (s.algorithm == "allreduce") return 2.0 * (s.topology->n() - 1) * latency;
    if (s.algorithm == "dpsgd" || s.algorithm == "choco") return latency;
    return 0;
}

}  // namespace

Time run_time_floor(const SimSetup& s, double steps) {
    if (!s.cluster) return 0;
    Time fastest = never;
    for (const auto& p : s.cluster->peers) fastest = std::min(fastest, p.base_time * p.factor);
    if (!std::isfinite(fastest)) return 0;
    return steps * std::max(fastest, wait_per_step(s));
}

void check_work(const SimSetup& s, double steps, const WorkOrigin& origin) {
    const double n = s.topology ? s.topology->n() : 0;
    // Every peer-step is an event at least.
    const auto pushes = static_cast<double>(EventQueue<int>::kMaxPushed);
    if (n * steps > pushes)
        throw ConfigError(origin.steps_file, origin.steps_path,
                          fmt::format("{:g} peers x {:g} steps each are at least {:.4g} events, "
                                      "more than the {:.4g} one simulation can hold",
                                      n, steps, n * steps, pushes),
                          fmt::format("lower {} to {:.0f} or less", origin.steps_path,
                                      std::floor(pushes / std::max(n, 1.0))));
    if (s.mode != Mode::math || !(s.eval_interval > 0)) return;
    const Time floor = run_time_floor(s, steps);
    const double evaluations = floor / s.eval_interval;
    if (evaluations <= kMaxEvaluations) return;
    const Time wait = wait_per_step(s);
    const std::string why =
        wait > 0 ? fmt::format(
                       "each of its {:g} steps waits at least {:.3g} s for {}'s messages "
                       "over the links' least latency",
                       steps, wait, s.algorithm)
                 : fmt::format("{:g} steps of at least the fastest peer's step time", steps);
    const std::string fix =
        fmt::format("give --eval-interval {:.3g} or more (about 10000 evaluations){}", floor / 1e4,
                    origin.interval_given ? "" : ", or a base_time near what a step really takes");
    const std::string what = fmt::format(
        "{}: evaluating every {:.3g} s of virtual time{} over a run of at least "
        "{:.3g} s ({}) is at least {:.3g} evaluations, more than the {:g} one run may "
        "make",
        s.algorithm, s.eval_interval,
        origin.interval_given ? ""
                              : " (the default: a quarter of a nominal epoch of the fastest peer)",
        floor, why, evaluations, kMaxEvaluations);
    if (origin.interval_given) throw ConfigError("", "--eval-interval", what, fix);
    throw ConfigError(s.cluster->source, "defaults.base_time", what, fix);
}

double memory_needed(const SimSetup& s, std::uint64_t parameters) {
    if (s.mode == Mode::cost || !s.topology) return 0;
    const int state = s.config ? optim::optimizer_state_copies(s.config->optimizer) : 0;
    const double protocol = s.algorithm == "allreduce" ? 3 : 1 + 3.0 * max_in_degree(*s.topology);
    return static_cast<double>(s.topology->n()) * static_cast<double>(parameters) * 4.0 *
           (2 + state + protocol);
}

void check_sizes(const SimSetup& s, std::uint64_t parameters, const SizeOrigin& origin) {
    if (s.cluster && s.cluster->has_churn()) {
        // Before anything runs: a churning cluster needs a protocol that can join and leave.
        const std::string why = proto::elastic_refusal(s.algorithm);
        if (!why.empty())
            throw ConfigError(s.cluster->source, "peers", why,
                              "simulate algorithm async, or drop join_at, leave_at and rejoin_at "
                              "(docs/operations/elastic.md)");
        check_dpsgd_churn(s, origin);
    }
    const bool from_flag = !origin.size_flag.empty();
    check_memory(memory_needed(s, parameters),
                 fmt::format("simulating {} peers of {} parameters with {}", s.topology->n(),
                             parameters, s.algorithm),
                 from_flag ? "" : origin.config_file, from_flag ? origin.size_flag : "model",
                 from_flag ? "simulate a smaller model" : "use a smaller model or fewer peers");
    if (!s.cluster || (s.algorithm != "dpsgd" && s.algorithm != "choco")) return;
    const json::Node* options = s.options ? &*s.options : nullptr;
    const double timeout = s.algorithm == "dpsgd"
                               ? proto::parse_dpsgd_options(options).resync_timeout
                               : proto::parse_choco_options(options).resync_timeout;
    const auto [rate, latency] = slowest_link(*s.cluster);
    const double bytes = static_cast<double>(parameters) * 4.0;
    const double seconds = bytes / rate + latency;
    if (seconds < timeout) return;
    const bool timeout_set = options && options->has("resync_timeout");
    throw ConfigError(
        from_flag ? "" : origin.config_file,
        from_flag ? origin.size_flag
                  : (timeout_set ? options->at("resync_timeout").path()
                                 : fmt::format("algorithms.{}.resync_timeout", s.algorithm)),
        fmt::format("one full model of {} takes {:.3g} s over the slowest link of {} ({:g} "
                    "bytes/s), not less than {}'s resync_timeout of {:g} s: waiting peers would "
                    "ask for full copies faster than they arrive",
                    format_bytes(bytes), seconds,
                    s.cluster->source.empty() ? "the cluster" : s.cluster->source, rate,
                    s.algorithm, timeout),
        fmt::format("set \"algorithms\": {{\"{}\": {{\"resync_timeout\": {:.3g}}}}} in the "
                    "training config given with --config (about twice the transfer), or "
                    "simulate a smaller model",
                    s.algorithm, 2 * seconds));
}

}  // namespace gossamer::sim
