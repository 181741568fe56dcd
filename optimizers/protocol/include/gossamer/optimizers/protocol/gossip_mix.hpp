#pragma once
// The mixing step of the gossip protocols, x <- w_self * x + sum_j w_j * buf_j (DESIGN.md,
// "Mixing is one fused, memory-bound pass"). Internal to optimizers/: it forwards to the fused
// vectorised kernel of core/mixing.hpp.

#include <span>
#include <vector>

namespace gossamer::proto::detail {

/// One neighbour's contribution to a mix.
struct MixTerm {
    double weight;
    std::span<const float> values;  ///< x.size() values
};

/// x <- w_self * x + sum_j terms[j].weight * terms[j].values in one fused pass (float).
void mix(std::span<float> x, double w_self, std::span<const MixTerm> terms);

}  // namespace gossamer::proto::detail
