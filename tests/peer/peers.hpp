#pragma once
// Helpers of the peer tests: N real-time peers as threads over the in-process backend
// (peer::run_inproc_peers) and topologies by family name.

#include <memory>

#include "gossamer/core/error.hpp"
#include "gossamer/peer/local.hpp"
#include "gossamer/topology/schedule.hpp"

namespace peer_test {

using namespace gossamer;
using Outcome = peer::PeerOutcome;
using peer::run_inproc_peers;

inline std::vector<Outcome> run_peers(const std::vector<proto::Protocol*>& protocols,
                                      const std::vector<proto::LocalWorker*>& workers,
                                      const std::function<peer::DriverOptions(int)>& options) {
    return run_inproc_peers(protocols, workers, options);
}

inline std::shared_ptr<const topology::Schedule> family(const char* name, int n,
                                                        topology::WeightRule w) {
    topology::FamilySpec f;
    f.family = name;
    f.n = n;
    f.weights = w;
    return topology::generate(f);
}

}  // namespace peer_test
