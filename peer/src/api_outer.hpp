#pragma once
// gossamer::Peer's outer layer (PeerOptions::outer, docs/library/api.md, "Outer rounds"): the
// user's worker wrapped in optim::OuterWorker (or StreamingWorker), so that the user's steps are
// its inner steps and the protocol takes one step per round.

#include <memory>

#include "gossamer/core/json.hpp"
#include "gossamer/core/partition.hpp"
#include "gossamer/optimizers/outer/streaming_worker.hpp"
#include "gossamer/peer.hpp"

namespace gossamer::api {

/// PeerOptions::outer built in C++ (Python's outer= is read by optim::parse_outer_options): the
/// limits of the config's "outer" section, with its lines, as ConfigError naming
/// PeerOptions::outer.<field>.
void check_outer_options(const optim::OuterOptions& o);

/// The outer layer around `user` for PeerOptions::outer, or null without it (or for the
/// identity). Refusals (the algorithm with its `algorithm_options`, a device, per-partition
/// gossip, a partition name `layout` lacks) are one ConfigError naming PeerOptions::outer.
std::unique_ptr<proto::LocalWorker> make_outer_worker(const PeerOptions& options,
                                                      proto::LocalWorker& user,
                                                      const PartitionLayout& layout,
                                                      const json::Node* algorithm_options);

}  // namespace gossamer::api
