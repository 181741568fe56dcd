#pragma once
/// The nearest-rank quantile, one rule for every figure that reports one (async's deadlines and
/// link-aware targets, the simulator's per-peer quantiles).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>

namespace gossamer {

/// The q-quantile (nearest rank, q in (0, 1]) of `values`, which it sorts in place; 0 when empty.
inline double nearest_rank_quantile(std::span<double> values, double q) {
    if (values.empty()) return 0.0;
    std::sort(values.begin(), values.end());
    const double n = static_cast<double>(values.size());
    const auto i = static_cast<std::size_t>(std::clamp(std::ceil(q * n), 1.0, n)) - 1;
    return values[i];
}

}  // namespace gossamer
