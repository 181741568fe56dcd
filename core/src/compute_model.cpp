#include "gossamer/core/compute_model.hpp"

#include <fmt/format.h>

#include <cmath>

#include "gossamer/core/error.hpp"
#include "gossamer/core/rng.hpp"

namespace gossamer {

Time stretched_duration(Time start, Time work, std::span<const SlowPeriod> periods) {
    // Walk the periods after `start`, spending the remaining work at rate 1 in the gaps and at
    // rate 1 / f inside a period; stop in the segment where the work runs out. Durations are
    // summed (not end times) so that a step untouched by any period takes exactly `work`.
    Time t = start, left = work, elapsed = 0.0;
    for (const SlowPeriod& p : periods) {
        if (p.to <= t) continue;
        if (p.from > t) {
            if (left <= p.from - t) return elapsed + left;
            elapsed += p.from - t;
            left -= p.from - t;
            t = p.from;
        }
        const Time capacity = (p.to - t) / p.factor;  // work the rest of the period absorbs
        if (left <= capacity) return elapsed + left * p.factor;
        elapsed += p.to - t;
        left -= capacity;
        t = p.to;
    }
    return elapsed + left;
}

ComputeModel::ComputeModel(const Cluster& cluster, std::uint64_t seed)
    : peers_(cluster.peers), seed_(seed) {
    if (peers_.empty()) throw Error("ComputeModel: the cluster has no peers");
}

const PeerSpec& ComputeModel::peer(int rank) const {
    if (rank < 0 || rank >= n())
        throw Error(fmt::format("ComputeModel: rank {} is out of range for {} peers", rank, n()));
    return peers_[static_cast<std::size_t>(rank)];
}

double ComputeModel::jitter(int rank, std::int64_t step) const {
    const Jitter& j = peer(rank).jitter;
    if (j.kind == JitterKind::constant) return 1.0;
    if (step < 0) throw Error(fmt::format("ComputeModel: step {} is negative", step));
    // One fresh stream per (rank, step): a draw never depends on which steps were asked before.
    Rng rng(derive_seed(derive_seed(seed_, static_cast<std::uint64_t>(rank)),
                        static_cast<std::uint64_t>(step)));
    if (j.kind == JitterKind::lognormal)
        return std::exp(j.sigma * rng.normal() - 0.5 * j.sigma * j.sigma);
    return 1.0 - j.width + 2.0 * j.width * rng.uniform();
}

Time ComputeModel::work(int rank, std::int64_t step) const {
    const PeerSpec& p = peer(rank);
    return p.base_time * p.factor * jitter(rank, step);
}

Time ComputeModel::step_duration(int rank, std::int64_t step, Time start) const {
    return stretched_duration(start, work(rank, step), peer(rank).slow);
}

Time ComputeModel::step_end(int rank, std::int64_t step, Time start) const {
    return start + step_duration(rank, step, start);
}

Time ComputeModel::failure_time(int rank) const {
    return peer(rank).fail_at;
}

}  // namespace gossamer
