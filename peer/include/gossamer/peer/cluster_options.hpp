#pragma once
/// A real peer's driver options, filled in one place: the cluster file mapped onto them
/// (options_for, shared by `gossamer launch` with peers as threads and `gossamer peer`: the same
/// emulation in both) and, for the peer job, the job's clock, timeouts and trace
/// (driver_options).

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
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

/// What the driver options of one peer process (`gossamer peer`) are filled from.
struct DriverSpec {
    int rank = 0;
    std::shared_ptr<const Cluster> cluster;  ///< null: natural speed
    std::uint64_t seed = 0;                  ///< the compute model's (the config's seed)
    std::string metrics_path;
    Millis stall_timeout{120'000};  ///< also caps the watchdog, so a short one shows its line
    /// The job's time origin (DriverOptions::job_start). A process started after its failure
    /// time on that clock (the launcher's restart at rejoin_at) had its failure already: it
    /// does not fail again (one line on stderr says so).
    std::optional<std::chrono::system_clock::time_point> job_start;
    std::string trace_path;  ///< "" none
    std::size_t trace_limit = 64'000'000;
};

/// options_for(spec.rank, spec.cluster, its compute model, spec.metrics_path) with the rest of
/// `spec`.
DriverOptions driver_options(const DriverSpec& spec);

}  // namespace gossamer::peer
