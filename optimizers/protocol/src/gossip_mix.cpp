#include "gossamer/optimizers/protocol/gossip_mix.hpp"

#include "gossamer/core/mixing.hpp"

namespace gossamer::proto::detail {

void mix(std::span<float> x, double w_self, std::span<const MixTerm> terms) {
    // The fused, vectorised kernel of core/mixing.hpp: one pass over memory for any number of
    // neighbours (float weights and float accumulation; docs/modules/mixing.md gives the error
    // bound).
    std::vector<gossamer::MixTerm> fused;
    fused.reserve(terms.size());
    for (const MixTerm& t : terms) fused.push_back({t.values, static_cast<float>(t.weight)});
    gossamer::mix(x, static_cast<float>(w_self), fused);
}

}  // namespace gossamer::proto::detail
