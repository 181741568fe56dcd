#include "gossamer/optimizers/protocol/quantile.hpp"

#include <algorithm>
#include <cmath>

namespace gossamer::proto {

double quantile(std::vector<double> values, double q) {
    return quantile_in_place(values, q);
}

double quantile_in_place(std::span<double> values, double q) {
    if (values.empty()) return 0.0;
    std::sort(values.begin(), values.end());
    const double rank = std::ceil(q * static_cast<double>(values.size()));
    const auto i = static_cast<std::size_t>(std::clamp(rank, 1.0, double(values.size()))) - 1;
    return values[i];
}

}  // namespace gossamer::proto
