#include "gossamer/peer/cluster_options.hpp"

#include <cmath>

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

}  // namespace gossamer::peer
