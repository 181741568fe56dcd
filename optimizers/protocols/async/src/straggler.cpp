#include "gossamer/optimizers/protocols/async/straggler.hpp"

#include <algorithm>
#include <cmath>

#include "gossamer/core/quantile.hpp"

namespace gossamer::proto {
namespace {

std::int64_t rounds_per_sweep(int degree, int targets) noexcept {
    if (degree <= 0 || targets <= 0) return 1;
    return (degree + targets - 1) / targets;
}

}  // namespace

double straggler_self_share(double base_self, double beta, double own_rate,
                            double neighbour_rate) noexcept {
    if (!(own_rate > 0) || !(neighbour_rate > 0)) return base_self;
    const double lag = 1.0 - own_rate / neighbour_rate;
    if (lag <= 0) return base_self;
    return base_self + (1.0 - base_self) * std::pow(lag, beta);
}

std::int64_t effective_edge_bound(std::int64_t requested, int degree, int targets) noexcept {
    const std::int64_t sweep = rounds_per_sweep(degree, targets);
    return requested <= 0 ? 2 * sweep : std::max(requested, sweep);
}

std::int64_t edge_force_age(std::int64_t bound, int degree, int targets) noexcept {
    return std::max<std::int64_t>(1, bound - rounds_per_sweep(degree, targets) + 1);
}

std::vector<int> pick_targets(std::span<const EdgeCandidate> candidates, int k, std::int64_t step,
                              std::int64_t force_age, Rng& rng) {
    return pick_targets_preferring(candidates, {}, k, step, force_age, rng);
}

std::vector<int> pick_targets_preferring(std::span<const EdgeCandidate> candidates,
                                         std::span<const std::pair<int, double>> preferred, int k,
                                         std::int64_t step, std::int64_t force_age, Rng& rng) {
    std::vector<EdgeCandidate> pool;
    std::vector<int> out;
    pick_targets_into(candidates, preferred, k, step, force_age, rng, pool, out);
    return out;
}

void pick_targets_into(std::span<const EdgeCandidate> candidates,
                       std::span<const std::pair<int, double>> preferred, int k, std::int64_t step,
                       std::int64_t force_age, Rng& rng, std::vector<EdgeCandidate>& pool,
                       std::vector<int>& out) {
    pool.assign(candidates.begin(), candidates.end());
    out.clear();
    // Least recently used first: an overdue edge that waits behind older ones is served within
    // ceil(degree / k) steps, which is what the bound B counts on. Peers are distinct, so
    // (last_used, peer) is a total order and sort gives what stable_sort gave, without its
    // buffer.
    std::sort(pool.begin(), pool.end(), [](const EdgeCandidate& a, const EdgeCandidate& b) {
        return a.last_used != b.last_used ? a.last_used < b.last_used : a.peer < b.peer;
    });
    const auto want = static_cast<std::size_t>(std::max(0, k));
    while (out.size() < want && !pool.empty() && step - pool.front().last_used >= force_age) {
        out.push_back(pool.front().peer);
        pool.erase(pool.begin());
    }
    for (const auto& [peer, accept] : preferred) {
        if (out.size() >= want) break;
        auto it = std::find_if(pool.begin(), pool.end(),
                               [p = peer](const EdgeCandidate& c) { return c.peer == p; });
        if (it == pool.end() || !(rng.uniform() < accept)) continue;
        out.push_back(it->peer);
        pool.erase(it);
    }
    while (out.size() < want && !pool.empty()) {
        double total = 0;
        for (const auto& c : pool) total += c.weight;
        double u = rng.uniform() * total;
        std::size_t pick = pool.size() - 1;
        for (std::size_t i = 0; i < pool.size(); ++i) {
            if (u < pool[i].weight) {
                pick = i;
                break;
            }
            u -= pool[i].weight;
        }
        out.push_back(pool[pick].peer);
        pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(pick));
    }
}

double quantile(std::vector<double> values, double q) {
    return quantile_in_place(values, q);
}

double quantile_in_place(std::span<double> values, double q) {
    return nearest_rank_quantile(values, q);
}

}  // namespace gossamer::proto
