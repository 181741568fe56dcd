#pragma once
// Helpers of the bootstrap tests that look at views and losses after the barrier.
#include <doctest/doctest.h>

#include <optional>

#include "cluster.hpp"

namespace gossamer::test {

/// n peers past the start-up barrier.
inline std::vector<std::unique_ptr<bs::Bootstrap>> joined(int n) {
    auto peers = start_peers(n);
    for (const auto& o : rendezvous_all(peers)) REQUIRE_MESSAGE(!o.failed, o.error);
    return peers;
}

/// What `peer` knows of `rank`'s loss, if anything.
inline std::optional<bs::PeerLoss> loss_of(const bs::Bootstrap& peer, int rank) {
    for (const auto& l : peer.lost_peers())
        if (l.rank == rank) return l;
    return std::nullopt;
}

inline bool has_view(const bs::Bootstrap& peer, std::uint64_t number,
                     const std::vector<int>& members) {
    const auto v = peer.agreed_view();
    return v.number == number && v.members == members;
}

}  // namespace gossamer::test
