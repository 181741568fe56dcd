#pragma once
/// Link-aware target choice of the async protocol (option "links": "aware"; the rule and why
/// the average stays exact are in docs/algorithms/async.md, "Link-aware async").
///
/// A push-sum share costs the whole vector whatever its fraction, so a slow edge is not given
/// smaller shares: it is pushed to less often, about as often as it can carry a share, and what
/// the sender pushes to it while its share is in flight adds up in the outbox. Pure functions.

#include <optional>

namespace gossamer::proto {

/// The factor a target's sampling weight (and a schedule target's acceptance) is multiplied by:
/// min(1, step_seconds / share_seconds)^power, where share_seconds is the measured time of one
/// share on the edge (EdgeSpeeds::seconds_for) and step_seconds the sender's own step time
/// (1 / its measured rate). An edge that carries a share within a step keeps its weight; one
/// that needs m steps per share is chosen about 1/m as often. Neutral (1) while either is
/// unknown (<= 0 or nullopt). Never below `floor` (> 0), so a slow edge stays a candidate
/// beside the edge bound that forces it.
double link_factor(std::optional<double> share_seconds, double own_rate, double power,
                   double floor = 1e-6) noexcept;

}  // namespace gossamer::proto
