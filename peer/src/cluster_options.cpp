#include "gossamer/peer/cluster_options.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace gossamer::peer {

DriverOptions options_for(int rank, const std::shared_ptr<const Cluster>& cluster,
                          const std::shared_ptr<const ComputeModel>& compute,
                          const std::string& metrics_path) {
    DriverOptions o;
    o.metrics_path = metrics_path;
    if (!cluster) return o;
    o.declared_step_time = [compute, rank](std::int64_t step, double start) {
        return compute->step_duration(rank, step, start);
    };
    o.link = [cluster, rank](int to) {
        const auto& l = cluster->link(rank, to);
        return LinkPacing{l.latency, l.bandwidth};
    };
    o.fail_at = compute->failure_time(rank);
    // A graceful leave at the cluster file's leave_at (docs/operations/elastic.md), on this peer's
    // clock.
    const double leave_at = cluster->peers[static_cast<std::size_t>(rank)].leave_at;
    if (std::isfinite(leave_at)) o.leave_at = leave_at;
    return o;
}

DriverOptions driver_options(const DriverSpec& spec) {
    std::shared_ptr<const ComputeModel> compute;
    if (spec.cluster) compute = std::make_shared<const ComputeModel>(*spec.cluster, spec.seed);
    DriverOptions o = options_for(spec.rank, spec.cluster, compute, spec.metrics_path);
    o.stall_timeout = spec.stall_timeout;
    if (spec.job_start) {
        o.job_start = spec.job_start;
        // The launcher restarts a crashed rank at its rejoin_at: that process has had its
        // failure already.
        const double now =
            std::chrono::duration<double>(std::chrono::system_clock::now() - *spec.job_start)
                .count();
        if (std::isfinite(o.fail_at) && now >= o.fail_at) {
            std::fprintf(stderr,
                         "[rank %d] started %.2f s into the job, after its failure time %g s "
                         "(cluster file): this process does not fail again\n",
                         spec.rank, now, o.fail_at);
            o.fail_at = std::numeric_limits<double>::infinity();
        }
    }
    // A short --timeout still shows the watchdog's line (what the peer waits for) first.
    o.watchdog = std::min(o.watchdog, spec.stall_timeout);
    o.trace_path = spec.trace_path;
    o.trace_limit = spec.trace_limit;
    return o;
}

}  // namespace gossamer::peer
