#pragma once
/// The lab's spec from the command line: a cluster file's network section (per-peer uplink and
/// downlink, per-link bandwidth; bytes/s there, bits/s in the lab) or one rate for every peer.

#include <optional>
#include <string>

#include "gossamer/lab/spec.hpp"
#include "gossamer/sim/cluster.hpp"

namespace gossamer::cli {

/// Converts a resolved cluster: uplink and downlink of every peer, and a link cap wherever a
/// link's bandwidth is below both its sender's uplink and its receiver's downlink (otherwise
/// the peer caps already bind).
lab::LabSpec lab_spec_from_cluster(const sim::Cluster& cluster);

/// Whether the cluster gives any link a latency: the kernel here has no netem, so the peers
/// emulate it and the launcher says so once.
bool cluster_has_latency(const sim::Cluster& cluster);

/// The peer count of a cluster file: `peers` when given, else the file's "n" (UsageError naming
/// the flag when neither).
int cluster_peer_count(const std::string& path, std::optional<int> peers);

}  // namespace gossamer::cli
