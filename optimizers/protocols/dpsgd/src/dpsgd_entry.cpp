// dpsgd's registry entry (registry.hpp): what drivers ask of it before it is built.
#include <fmt/format.h>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocol/questions.hpp"
#include "gossamer/optimizers/protocols/dpsgd/dpsgd.hpp"

namespace gossamer::proto {
namespace {

// dpsgd follows churn without delay, reweight, partition_ready and multirate (dpsgd_elastic.cpp).
void check_dpsgd_churn(const JobSetup& s) {
    const auto o = parse_dpsgd_options(s.options);
    const char* key = o.delay > 0         ? "delay"
                      : o.reweight        ? "reweight"
                      : o.partition_ready ? "partition_ready"
                                          : nullptr;
    if (key)
        throw ConfigError(s.config_file, s.options->at(key).path(),
                          fmt::format("algorithm dpsgd with {} cannot join, leave or rejoin a "
                                      "running job yet, and the cluster {} has churn",
                                      key, s.cluster),
                          fmt::format("drop \"{}\", or the cluster's join_at, leave_at and "
                                      "rejoin_at (docs/operations/elastic.md)",
                                      key));
    if (s.multirate)
        throw ConfigError(s.config_file, "multirate",
                          fmt::format("algorithm dpsgd with multirate partitions cannot join, "
                                      "leave or rejoin a running job yet, and the cluster {} has "
                                      "churn",
                                      s.cluster),
                          "drop \"multirate\", or the cluster's join_at, leave_at and rejoin_at "
                          "(docs/operations/elastic.md)");
}

}  // namespace

Algorithm dpsgd_algorithm() {
    Algorithm a;
    a.name = "dpsgd";
    a.summary =
        "synchronous gossip averaging with the topology's row-stochastic W (atc, cta, one-step "
        "delayed)";
    a.make = make_dpsgd;
    a.defaults = default_for_peer | default_for_sim | default_for_launch;
    a.elastic = Elastic::by_default;
    a.per_partition_gossip = true;
    a.check_churn = check_dpsgd_churn;
    // At its default options every step waits for one hop from each in-neighbour.
    a.wait_per_step = [](const JobSetup& s, double latency) {
        return default_options(s.options) ? latency : 0.0;
    };
    a.resync_timeout = [](const json::Node* o) { return parse_dpsgd_options(o).resync_timeout; };
    return a;
}

}  // namespace gossamer::proto
