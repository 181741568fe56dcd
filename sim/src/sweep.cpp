// The runs of `gossamer sim`: every algorithm over every seed, their files and statistics.
#include "gossamer/sim/sweep.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "gossamer/core/trace.hpp"

namespace gossamer::sim {
namespace {

// The setup of one run: the sweep's, with the algorithm and its options from the config.
SimSetup run_setup(const SweepSpec& spec, const std::string& algo) {
    SimSetup s = spec.base;
    s.algorithm = algo;
    s.config = spec.config;
    if (spec.config) s.options = spec.config->algorithm_options(algo);
    return s;
}

}  // namespace

Time nominal_eval_interval(const Cluster& cluster, double batches) {
    Time fastest = never;
    for (const auto& peer : cluster.peers)
        fastest = std::min(fastest, peer.base_time * peer.factor);
    return fastest * batches / 4;
}

void check_sweep(const SweepSpec& spec, std::uint64_t parameters, double steps,
                 const SweepOrigins& origins) {
    for (const auto& algo : spec.algorithms) {
        const SimSetup s = run_setup(spec, algo);
        check_sizes(s, parameters, origins.size);
        // The work a run needs (events, evaluations) is bounded before it starts.
        check_work(s, steps, origins.work);
    }
}

std::vector<AlgorithmSummary> run_sweep(const SweepSpec& spec,
                                        const std::function<void(const RunReport&)>& on_run) {
    const auto progress = [&](std::string_view line, bool keep) {
        if (spec.progress) spec.progress(line, keep);
    };
    const auto* cfg = spec.config;
    std::vector<AlgorithmSummary> out;
    for (const auto& algo : spec.algorithms) {
        SweepStats stats(algo, spec.goal, spec.goal_is_loss);
        for (int k = 0; k < spec.seeds; ++k) {
            SimSetup s = spec.base;
            s.algorithm = algo;
            s.seed = (cfg ? cfg->seed : 1) + static_cast<std::uint64_t>(k);
            optim::TrainingConfig c;
            if (cfg) {
                c = *cfg;
                c.seed = s.seed;
                c.sharding.seed = s.seed;
                s.config = &c;
                s.options = cfg->algorithm_options(algo);
            }
            s.progress = [&](std::string_view line) { progress(line, false); };
            progress(fmt::format("{} seed {}/{}", algo, k + 1, spec.seeds), true);
            std::optional<trace::Recorder> rec;
            if (spec.trace_file) {
                rec.emplace("virtual", spec.trace_limit);
                rec->set_info("algorithm", algo);
                rec->set_info("seed", s.seed);
                s.trace = &*rec;
            }
            const auto r = simulate(s);
            write_run(spec.out / algo / fmt::format("seed{}", k), r);
            RunReport report{algo, k, r, std::nullopt, 0, 1};
            if (rec) {
                const bool one = spec.algorithms.size() == 1 && spec.seeds == 1;
                const std::string path =
                    one ? *spec.trace_file
                        : trace::tagged_path(*spec.trace_file, fmt::format("{}-seed{}", algo, k));
                rec->write(path);
                report.trace_path = path;
                report.trace_events = rec->events();
                report.trace_every = rec->every();
            }
            if (on_run) on_run(report);
            stats.add(r);
        }
        out.push_back(stats.summary());
    }
    return out;
}

}  // namespace gossamer::sim
