#pragma once
/// Nearest-rank quantiles: async's deadlines (a percentile of measured arrival gaps) and the
/// statistics drivers print over seeds and peers.

#include <span>
#include <vector>

namespace gossamer::proto {

/// The q-quantile (nearest rank, q in (0, 1]) of `values`; 0 when empty.
double quantile(std::vector<double> values, double q);
/// The same, sorting `values` in place (no allocation).
double quantile_in_place(std::span<double> values, double q);

}  // namespace gossamer::proto
