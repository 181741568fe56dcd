// Views: rank 0 installs a membership without its lost peers only once a majority of the
// previous view acknowledged it, and tells a peer it declared lost (docs/modules/bootstrap.md,
// "Views").
#include <doctest/doctest.h>

#include <string>

#include "views_support.hpp"

using namespace gossamer::test;

namespace {

bool lost(const bs::Bootstrap& peer, int rank) {
    return loss_of(peer, rank).has_value();
}

}  // namespace

TEST_SUITE("bootstrap") {
    TEST_CASE("views: every peer starts in view 0 with every rank") {
        auto peers = joined(3);
        for (const auto& p : peers) CHECK(has_view(*p, 0, {0, 1, 2}));
        CHECK(peers[1]->confirm_membership(2s) == bs::Standing::member);
        CHECK(peers[0]->confirm_membership(2s) == bs::Standing::member);
        CHECK_FALSE(peers[2]->expelled());
    }

    TEST_CASE(
        "views: a lost peer is removed once a majority acknowledged, and every member learns it") {
        auto peers = joined(4);
        peers[3]->inject_fault(bs::Fault::crash);
        wait_until(
            [&] {
                return has_view(*peers[0], 1, {0, 1, 2}) && has_view(*peers[1], 1, {0, 1, 2}) &&
                       has_view(*peers[2], 1, {0, 1, 2});
            },
            3s);
        for (int r = 0; r < 3; ++r) {
            CAPTURE(r);
            CHECK(has_view(*peers[static_cast<std::size_t>(r)], 1, {0, 1, 2}));
        }
        // Then the next loss: {0, 1} is a majority of the view {0, 1, 2}.
        peers[2]->inject_fault(bs::Fault::crash);
        wait_until([&] { return has_view(*peers[1], 2, {0, 1}); }, 3s);
        CHECK(has_view(*peers[0], 2, {0, 1}));
        CHECK(has_view(*peers[1], 2, {0, 1}));
    }

    TEST_CASE("views: two peers hung at once are a split: no view without them is installed") {
        // Rank 0 loses rank 2, then rank 3, but neither acknowledges anything: {0, 1} never
        // becomes a view, so the half with rank 0 cannot write a result alone.
        auto peers = joined(4);
        peers[2]->inject_fault(bs::Fault::silence);
        peers[3]->inject_fault(bs::Fault::silence);
        wait_until([&] { return lost(*peers[0], 2) && lost(*peers[0], 3); }, 3s);
        REQUIRE(lost(*peers[0], 2));
        REQUIRE(lost(*peers[0], 3));
        std::this_thread::sleep_for(300ms);  // acknowledgements would have come by now
        CHECK(has_view(*peers[0], 0, {0, 1, 2, 3}));
        CHECK(has_view(*peers[1], 0, {0, 1, 2, 3}));
    }

    TEST_CASE("views: a hung peer declared lost is told so, and asking confirms it") {
        auto peers = joined(3);
        peers[2]->inject_fault(bs::Fault::silence);
        wait_until([&] { return peers[2]->expelled().has_value(); }, 3s);
        REQUIRE(peers[2]->expelled());
        CHECK_MESSAGE(has(*peers[2]->expelled(), "rank 2 ("), *peers[2]->expelled());
        CHECK_MESSAGE(has(*peers[2]->expelled(), "no heartbeat"), *peers[2]->expelled());
        CHECK(peers[2]->confirm_membership(1s) == bs::Standing::expelled);
        CHECK(peers[1]->confirm_membership(2s) == bs::Standing::member);
        CHECK_FALSE(peers[1]->expelled());
    }

    TEST_CASE("views: rank 0 cut off from a majority does not confirm itself") {
        auto peers = joined(3);
        peers[1]->inject_fault(bs::Fault::crash);
        peers[2]->inject_fault(bs::Fault::crash);
        wait_until([&] { return lost(*peers[0], 1) && lost(*peers[0], 2); }, 3s);
        CHECK(peers[0]->confirm_membership(1s) == bs::Standing::unknown);
    }

    TEST_CASE("views: rank 0 whose peers finished and left on purpose still confirms itself") {
        // After a pause of the whole job the fast peers may finish first: goodbyes are no cut.
        auto peers = joined(3);
        peers[1].reset();
        peers[2].reset();
        wait_until([&] { return lost(*peers[0], 1) && lost(*peers[0], 2); }, 3s);
        for (const auto& l : peers[0]->lost_peers()) CHECK(l.left);
        CHECK(peers[0]->confirm_membership(1s) == bs::Standing::member);
    }
}
