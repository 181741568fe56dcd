#pragma once
/// The cluster file mapped onto one real peer's driver options, shared by `gossamer launch`
/// (peers as threads) and `gossamer peer` (one process): the same emulation in both.

#include <memory>
#include <string>

#include "gossamer/core/cluster.hpp"
#include "gossamer/core/compute_model.hpp"
#include "gossamer/peer/driver.hpp"

namespace gossamer::peer {

/// Steps padded to the compute model's duration (base time x factor x jitter, slow periods by
/// start time), sends paced by the cluster's links, the failure time; metrics to
/// `metrics_path`. Without a cluster (null) only the metrics path is set: natural speed.
DriverOptions options_for(int rank, const std::shared_ptr<const Cluster>& cluster,
                          const std::shared_ptr<const ComputeModel>& compute,
                          const std::string& metrics_path);

}  // namespace gossamer::peer
