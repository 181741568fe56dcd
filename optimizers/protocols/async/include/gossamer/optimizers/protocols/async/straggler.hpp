#pragma once
/// Straggler-aware, sender-side choices of the async protocol as pure functions (DESIGN.md,
/// "straggler-aware weights"; derivation in docs/algorithms/async.md). Only a sender decides how to
/// split its own mass, so every split's column sums to 1 and push-sum stays unbiased.

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "gossamer/core/rng.hpp"

namespace gossamer::proto {

/// The fraction of its mass a peer keeps: s = b + (1 - b) * (1 - rho)_+ ^ beta, where
/// rho = own_rate / neighbour_rate (steps per second). Equal or faster peers keep b; a slower peer
/// keeps more and pushes (1 - b)(1 - (1 - rho)^beta) > 0, i.e. (1 - b) rho for beta = 1.
/// A rate <= 0 (not measured yet) gives b.
double straggler_self_share(double base_self, double beta, double own_rate,
                            double neighbour_rate) noexcept;

/// The edge bound B in force for a peer with `degree` live out-edges pushing to `targets` of
/// them per step: `requested` (0: automatic, 2 * ceil(degree / targets)), raised to
/// ceil(degree / targets), below which no schedule can use every edge within B steps.
std::int64_t effective_edge_bound(std::int64_t requested, int degree, int targets) noexcept;

/// An edge is forced once it has gone unused for A = B - ceil(degree / targets) + 1 steps; then
/// each edge is used at least once in every B consecutive steps (docs/algorithms/async.md).
std::int64_t edge_force_age(std::int64_t bound, int degree, int targets) noexcept;

/// One live out-edge a peer may push to.
struct EdgeCandidate {
    int peer = 0;
    std::int64_t last_used = -1;  ///< the sender's step it was last used (-1: never)
    double weight = 1.0;          ///< sampling weight (rate^power), > 0
};

/// The `k` targets of step `step`: first the edges unused for `force_age` steps or more, least
/// recently used first (ties: lower rank); the remaining slots sampled without replacement with
/// probability proportional to `weight`. Returns min(k, candidates) distinct peers.
std::vector<int> pick_targets(std::span<const EdgeCandidate> candidates, int k, std::int64_t step,
                              std::int64_t force_age, Rng& rng);

/// As pick_targets, but after the forced edges each peer of `preferred` (in order; absent or
/// already chosen ones skipped) takes a slot with its acceptance probability (second), before
/// the remaining slots are sampled by weight. `async` prefers the topology's round-t targets, so
/// that in-step peers follow the schedule (one-peer exponential averages exactly in log2 n
/// rounds), and accepts a slower one with probability (its rate / own rate)^power.
std::vector<int> pick_targets_preferring(std::span<const EdgeCandidate> candidates,
                                         std::span<const std::pair<int, double>> preferred, int k,
                                         std::int64_t step, std::int64_t force_age, Rng& rng);

/// pick_targets_preferring into `out`, with `pool` as scratch: no allocation once both vectors
/// have grown to the degree (the simulator calls this once per peer-step).
void pick_targets_into(std::span<const EdgeCandidate> candidates,
                       std::span<const std::pair<int, double>> preferred, int k, std::int64_t step,
                       std::int64_t force_age, Rng& rng, std::vector<EdgeCandidate>& pool,
                       std::vector<int>& out);

/// The q-quantile (nearest rank, q in (0, 1]) of `values`; 0 when empty.
double quantile(std::vector<double> values, double q);
/// The same, sorting `values` in place (no allocation).
double quantile_in_place(std::span<double> values, double q);

}  // namespace gossamer::proto
