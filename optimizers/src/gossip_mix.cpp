#include "gossip_mix.hpp"

#include <cassert>

namespace gossamer::proto::detail {

void mix(std::span<float> x, double w_self, std::span<const MixTerm> terms) {
#ifndef NDEBUG
    for (const MixTerm& t : terms) assert(t.values.size() == x.size());
#endif
    for (std::size_t k = 0; k < x.size(); ++k) {
        double acc = w_self * x[k];
        for (const MixTerm& t : terms) acc += t.weight * t.values[k];
        x[k] = static_cast<float>(acc);
    }
}

}  // namespace gossamer::proto::detail
