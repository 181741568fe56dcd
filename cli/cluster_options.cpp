#include "cluster_options.hpp"

namespace gossamer::cli {

peer::DriverOptions options_for(int rank, const std::shared_ptr<const sim::Cluster>& cluster,
                                const std::shared_ptr<const sim::ComputeModel>& compute,
                                const std::string& metrics_path) {
    peer::DriverOptions o;
    o.metrics_path = metrics_path;
    if (!cluster) return o;
    o.declared_step_time = [compute, rank](std::int64_t step, double start) {
        return compute->step_duration(rank, step, start);
    };
    o.link = [cluster, rank](int to) {
        const auto& l = cluster->link(rank, to);
        return peer::LinkPacing{l.latency, l.bandwidth};
    };
    o.fail_at = compute->failure_time(rank);
    return o;
}

}  // namespace gossamer::cli
