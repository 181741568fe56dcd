#pragma once
/// The live part of a topology in an elastic job (docs/operations/elastic.md): the version of the
/// topology the protocols mix over while some ranks are absent (not joined yet, left, or down).

#include <memory>
#include <string>
#include <vector>

#include "gossamer/topology/analysis.hpp"
#include "gossamer/topology/schedule.hpp"

namespace gossamer::topology {

/// The rounds of `s` (one period; a schedule with no period: its first Schedule::kBaseRounds)
/// restricted to the `live` ranks (ascending, renumbered 0.. in that order), with each absent
/// neighbour's weight moved to the peer's own, as the protocols do: for averaging schedules an
/// absent sender's W_ij goes to W_ii (rows still sum to 1; a symmetric W stays doubly
/// stochastic), for push-sum schedules an absent receiver's W_ij goes to W_jj (columns still sum
/// to 1). Throws TopologyError when `live` is empty, unsorted or out of range.
std::shared_ptr<const Schedule> live_schedule(const Schedule& s, const std::vector<int>& live);

/// analyse(live_schedule(s, live)) with a budget fit for a log line: at most 10,000 averaging
/// rounds and 2e7 multiply-adds (a live part that is not strongly connected may never average).
Report analyse_live(const Schedule& s, const std::vector<int>& live);

/// One line on a live version from its report: "topology version V: M of N peers live (ranks
/// ...): strongly connected, spectral gap G, R rounds to 1e-6".
std::string describe_live(const Report& r, const std::vector<int>& live, int n, int version);

}  // namespace gossamer::topology
