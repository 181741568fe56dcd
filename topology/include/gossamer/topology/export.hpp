#pragma once
/// Writers for one round of a topology: Graphviz DOT and the mixing matrix as CSV.

#include <string>
#include <string_view>

#include "gossamer/topology/schedule.hpp"

namespace gossamer::topology {

/// Graphviz DOT: one node per peer (labelled with its self weight), one arrow j -> i per
/// sender/receiver pair labelled with W_ij. An undirected pair with equal weights is drawn once
/// without arrowheads.
std::string to_dot(const Round& round, std::string_view graph_name);

/// The dense matrix W as CSV, row i = receiver i, column j = sender j, 17 significant digits.
std::string to_csv(const MixingMatrix& w);

}  // namespace gossamer::topology
