#pragma once
// Per-edge staleness and mixing weights for gossamer report's heatmaps (docs/operations/report.md),
// from the per-edge metrics the protocols write (edge_metrics(): a sim's peers.jsonl, a launch
// peer's summary line).

#include <cstddef>
#include <vector>

#include "gossamer/core/json.hpp"

namespace gossamer::launch {

/// [sender][receiver]; NaN where the metrics say nothing about the edge (not an edge).
struct EdgeMaps {
    std::vector<std::vector<double>> staleness, weight;
    bool empty() const { return staleness.empty() && weight.empty(); }
};

/// Adds peer `self`'s edge metrics (an array of objects with "peer"; anything else is ignored)
/// to `maps`, sized for n peers. Staleness: "staleness_mean", else "staleness", in the cell
/// (peer, self) of an edge self received on. Weight: "weight" (the weight receiver self gives
/// sender peer) in (peer, self), or "last_fraction" (async: the share of its mass sender self
/// last pushed to peer) in (self, peer).
void add_edge_metrics(int self, const json::Json& edges, std::size_t n, EdgeMaps& maps);

}  // namespace gossamer::launch
