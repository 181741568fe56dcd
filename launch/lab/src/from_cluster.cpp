// The cluster file's network section as lab caps (from_cluster.hpp).
#include "gossamer/lab/from_cluster.hpp"

#include <algorithm>

#include "gossamer/core/error.hpp"

namespace gossamer::lab {

LabSpec spec_from_cluster(const Cluster& c) {
    // A rack's shared uplink has no htb class here: refuse rather than run without it.
    if (!c.racks.empty())
        throw ConfigError(c.source, "network.racks",
                          "the lab does not model racks (a rack's shared uplink and downlink)",
                          "model them through per-pair network.links caps between the racks' "
                          "ranks (docs/formats/cluster-format.md, \"Racks\"), or drop "
                          "\"racks\"; gossamer sim models racks");
    LabSpec spec;
    for (const auto& p : c.peers) spec.peers.push_back({p.uplink * 8.0, p.downlink * 8.0});
    for (int i = 0; i < c.n(); ++i)
        for (int j = 0; j < c.n(); ++j) {
            if (i == j) continue;
            const double bw = c.link(i, j).bandwidth * 8.0;
            if (bw < spec.peers[static_cast<std::size_t>(i)].uplink &&
                bw < spec.peers[static_cast<std::size_t>(j)].downlink)
                spec.links.push_back({i, j, bw});
        }
    return spec;
}

bool cluster_has_latency(const Cluster& c) {
    if (c.default_link.latency > 0) return true;
    return std::any_of(c.links.begin(), c.links.end(),
                       [](const auto& l) { return l.second.latency > 0; });
}

}  // namespace gossamer::lab
