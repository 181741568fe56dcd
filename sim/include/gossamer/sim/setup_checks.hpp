#pragma once
/// Checks of a simulation's sizes before it runs (docs/simulator.md, "Sizes"): the memory its
/// peers keep, and dpsgd's and choco's resync timeouts against the time one full model takes
/// on the slowest link. Both are one ConfigError line, so a size that cannot work is refused
/// up front instead of ending in a std::bad_alloc half-way.

#include <cstdint>
#include <string>

#include "gossamer/sim/simulation.hpp"

namespace gossamer::sim {

/// About the bytes simulate(s) keeps for its peers' values, with `parameters` floats per model:
/// per peer (math mode) parameters x 4 bytes x (the parameters and the gradient, the
/// optimizer's state, and the protocol's copies: 3 for allreduce, 1 + 3 x the largest in-degree
/// for the gossip protocols: replicas, receive buffers, messages in flight). Cost mode keeps no
/// values: 0.
double memory_needed(const SimSetup& s, std::uint64_t parameters);

/// Where a setup's sizes came from, for the error lines.
struct SizeOrigin {
    std::string config_file;  ///< the training config ("" when none)
    std::string size_flag;    ///< the flag that set the model size ("--model-size"), or ""
};

/// Throws ConfigError when memory_needed() exceeds what the machine leaves (core/memory.hpp), or
/// when dpsgd's or choco's resync_timeout is not longer than one full model of `parameters`
/// floats takes over the slowest link of the cluster (waiting peers would then ask for full
/// copies faster than they arrive, and the event queue would grow without bound), and when the
/// cluster has churn (join_at, leave_at, rejoin_at) that the algorithm cannot follow
/// (proto::elastic_refusal; docs/elastic.md).
void check_sizes(const SimSetup& s, std::uint64_t parameters, const SizeOrigin& origin);

}  // namespace gossamer::sim
