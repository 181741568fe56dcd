#pragma once
/// A lab's caps from a cluster file's network section (docs/formats/cluster-format.md): bytes/s
/// there, bits/s here.

#include "gossamer/core/cluster.hpp"
#include "gossamer/lab/spec.hpp"

namespace gossamer::lab {

/// Uplink and downlink of every peer, and a link cap wherever a link's bandwidth is below both
/// its sender's uplink and its receiver's downlink (otherwise the peer caps already bind).
/// Throws ConfigError for a cluster with network.racks: the lab does not model them.
LabSpec spec_from_cluster(const Cluster& cluster);

/// Whether the cluster gives any link a latency: the kernel here has no netem, so the peers
/// emulate it and the launcher says so once.
bool cluster_has_latency(const Cluster& cluster);

}  // namespace gossamer::lab
