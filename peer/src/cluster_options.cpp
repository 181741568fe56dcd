#include "gossamer/peer/cluster_options.hpp"

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
    return o;
}

}  // namespace gossamer::peer
