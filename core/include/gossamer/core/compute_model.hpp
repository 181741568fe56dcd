#pragma once
/// How long each local step of each peer takes in virtual time (docs/formats/cluster-format.md,
/// "Timing"). Deterministic: the same (seed, rank, step, start) always gives the same duration,
/// whatever order the simulator asks in.

#include <cstdint>
#include <span>
#include <vector>

#include "gossamer/core/cluster.hpp"

namespace gossamer {

/// The virtual seconds that `work` seconds of nominal compute, begun at `start`, take when the
/// peer works at rate 1 / f inside each slow period [from, to) and at rate 1 outside. `periods`
/// must be sorted by `from` and disjoint (as the loader leaves them). Closed form: the part of
/// the work done inside a period takes f times as long, so the result is
/// work + sum over periods of (1 - 1/f) x (virtual time the step spends inside the period).
Time stretched_duration(Time start, Time work, std::span<const SlowPeriod> periods);

/// Step times of every peer of a cluster, for one seed.
class ComputeModel {
  public:
    /// Copies what it needs from `cluster`. Throws gossamer::Error for an empty cluster.
    ComputeModel(const Cluster& cluster, std::uint64_t seed);

    int n() const { return static_cast<int>(peers_.size()); }

    /// The jitter J of step `step` (>= 0) of peer `rank`: a pure function of (seed, rank, step)
    /// with E[J] = 1; independent across ranks and steps.
    double jitter(int rank, std::int64_t step) const;
    /// Nominal compute of that step in seconds: base_time x factor x J.
    Time work(int rank, std::int64_t step) const;
    /// Virtual seconds that step takes when it starts at `start`: work() stretched by the slow
    /// periods it overlaps (see stretched_duration).
    Time step_duration(int rank, std::int64_t step, Time start) const;
    /// start + step_duration(rank, step, start).
    Time step_end(int rank, std::int64_t step, Time start) const;
    /// When peer `rank` stops; `never` for a peer that does not fail.
    Time failure_time(int rank) const;

    const PeerSpec& peer(int rank) const;

  private:
    std::vector<PeerSpec> peers_;
    std::uint64_t seed_;
};

}  // namespace gossamer
