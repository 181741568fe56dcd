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
#include "gossamer/optimizers/protocol/questions.hpp"
#include "gossamer/sim/event_queue.hpp"

namespace gossamer::sim {
namespace {

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

// What the algorithm's registry entry reads of this setup (proto::JobSetup).
proto::JobSetup job_setup(const SimSetup& s, const std::string& config_file) {
    proto::JobSetup j;
    j.options = s.options ? &*s.options : nullptr;
    j.topology = s.topology.get();
    j.multirate = s.config && json::Node(s.config->doc).has("multirate");
    j.config_file = config_file;
    j.cluster = s.cluster ? s.cluster->source : "";
    return j;
}

// The least latency of any link: the default and every override.
Time least_latency(const Cluster& c) {
    Time least = c.default_link.latency;
    for (const auto& [pair, link] : c.links) least = std::min(least, link.latency);
    return least;
}

// Seconds each step waits for messages at least: the algorithm's answer (its registry entry),
// 0 with multirate partitions, which may relax it.
Time wait_per_step(const SimSetup& s) {
    if (!s.cluster || !s.topology) return 0;
    if (s.config && json::Node(s.config->doc).has("multirate")) return 0;
    return proto::wait_per_step(s.algorithm, job_setup(s, ""), least_latency(*s.cluster));
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
    const double protocol = proto::model_copies(s.algorithm, job_setup(s, ""));
    // The outer layer keeps the inner point, the pseudo-gradient and the outer momentum.
    const auto& outer = s.config ? s.config->outer : std::nullopt;
    const double layer =
        outer && !outer->identity()
            ? (outer->momentum > 0 ? 3 : 2) + (outer->kind == optim::OuterKind::delayed_nesterov)
            : 0;
    return static_cast<double>(s.topology->n()) * static_cast<double>(parameters) * 4.0 *
           (2 + state + protocol + layer);
}

void check_sizes(const SimSetup& s, std::uint64_t parameters, const SizeOrigin& origin) {
    if (s.cluster && s.cluster->has_churn()) {
        // Before anything runs: a churning cluster needs a protocol that can join and leave.
        const std::string why = proto::elastic_refusal(s.algorithm);
        if (!why.empty())
            throw ConfigError(s.cluster->source, "peers", why,
                              fmt::format("simulate algorithm {}, or drop join_at, leave_at and "
                                          "rejoin_at (docs/operations/elastic.md)",
                                          proto::elastic_choice()));
        proto::check_churn(s.algorithm, job_setup(s, origin.config_file));
    }
    const bool from_flag = !origin.size_flag.empty();
    check_memory(memory_needed(s, parameters),
                 fmt::format("simulating {} peers of {} parameters with {}", s.topology->n(),
                             parameters, s.algorithm),
                 from_flag ? "" : origin.config_file, from_flag ? origin.size_flag : "model",
                 from_flag ? "simulate a smaller model" : "use a smaller model or fewer peers");
    const json::Node* options = s.options ? &*s.options : nullptr;
    const auto resync = s.cluster ? proto::resync_timeout(s.algorithm, options) : std::nullopt;
    if (!resync) return;
    const double timeout = *resync;
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
