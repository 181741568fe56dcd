// After the barrier: a peer that hangs, is killed or leaves is noticed within the heartbeat time.
#include <doctest/doctest.h>

#include <atomic>
#include <string>

#include "cluster.hpp"

using namespace gossamer::test;

namespace {

bool lost(const bs::Bootstrap& peer, int rank) {
    for (const auto& l : peer.lost_peers())
        if (l.rank == rank) return true;
    return false;
}

// Why `peer` lost `rank` ("" if it did not).
std::string reason_lost(const bs::Bootstrap& peer, int rank) {
    for (const auto& l : peer.lost_peers())
        if (l.rank == rank) return l.reason;
    return "";
}

std::vector<std::unique_ptr<bs::Bootstrap>> joined_peers(int n) {
    auto peers = start_peers(n);
    for (const auto& o : rendezvous_all(peers)) REQUIRE_MESSAGE(!o.failed, o.error);
    return peers;
}

}  // namespace

TEST_SUITE("bootstrap") {
    TEST_CASE("a silent peer is reported by every other peer within the heartbeat timeout") {
        auto peers = joined_peers(4);
        std::atomic<int> calls{0};
        peers[1]->on_peer_lost([&](const bs::PeerLoss& l) {
            if (l.rank == 2) ++calls;
        });
        peers[2]->inject_fault(bs::Fault::silence);
        // Timeout 800 ms: noticed at the timeout, plus forwarding and a loaded machine's delays.
        auto took = wait_until(
            [&] { return lost(*peers[0], 2) && lost(*peers[1], 2) && lost(*peers[3], 2); }, 3s);
        CHECK(took < 1500ms);
        CHECK(took >= 600ms);  // the last beat was at most 100 ms before the silence began
        CHECK(calls == 1);
        auto losses = peers[3]->lost_peers();
        REQUIRE(losses.size() == 1);
        CHECK_MESSAGE(has(losses[0].reason, "rank 2 (" + peers[2]->endpoint().str() +
                                                ") vanished: no heartbeat for 0.8 s"),
                      losses[0].reason);
        CHECK_FALSE(lost(*peers[0], 1));
        CHECK_FALSE(lost(*peers[0], 3));
    }

    TEST_CASE("a killed peer is reported at once through its reset connection") {
        auto peers = joined_peers(4);
        peers[3]->inject_fault(bs::Fault::crash);
        auto took = wait_until(
            [&] { return lost(*peers[0], 3) && lost(*peers[1], 3) && lost(*peers[2], 3); }, 2s);
        CHECK(took < 600ms);
        CHECK_MESSAGE(has(peers[1]->lost_peers().at(0).reason, "rank 3 ("), "");
        CHECK_MESSAGE(has(peers[1]->lost_peers().at(0).reason, "connection lost"),
                      peers[1]->lost_peers().at(0).reason);
        CHECK_FALSE(peers[0]->lost_peers().at(0).left);  // a crash, seen directly
        CHECK_FALSE(peers[1]->lost_peers().at(0).left);  // and forwarded by rank 0
    }

    TEST_CASE("a peer that closes its bootstrap is reported as having left") {
        auto peers = joined_peers(3);
        peers[1].reset();
        auto took = wait_until([&] { return lost(*peers[0], 1) && lost(*peers[2], 1); }, 2s);
        CHECK(took < 600ms);
        CHECK_MESSAGE(has(peers[2]->lost_peers().at(0).reason, "left the job"),
                      peers[2]->lost_peers().at(0).reason);
        CHECK(peers[0]->lost_peers().at(0).left);  // the goodbye, seen directly
        CHECK(peers[2]->lost_peers().at(0).left);  // and forwarded by rank 0
    }

    TEST_CASE("a silent rank 0 is reported by every other peer") {
        auto peers = joined_peers(3);
        peers[0]->inject_fault(bs::Fault::silence);
        auto took = wait_until([&] { return lost(*peers[1], 0) && lost(*peers[2], 0); }, 3s);
        CHECK(took < 1500ms);
        CHECK(took >= 600ms);
        // (rank 2 may be reported first, forwarded by rank 0 when rank 2 closed its side.)
        CHECK_MESSAGE(has(reason_lost(*peers[1], 0), "the lowest live rank takes over"),
                      reason_lost(*peers[1], 0));
    }
}
