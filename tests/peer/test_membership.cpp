// The majority rule and the pause watch (peer/membership.hpp): pure functions, checked
// exhaustively over small jobs.
#include <doctest/doctest.h>

#include <chrono>

#include "gossamer/peer/membership.hpp"

using namespace std::chrono_literals;
using gossamer::peer::majority;
using gossamer::peer::PauseWatch;

TEST_CASE("membership: only a strict majority may write, a half or a lone peer never does") {
    CHECK(majority(1, 1).met());  // a job of one peer is its own majority
    CHECK_FALSE(majority(1, 2).met());
    CHECK_FALSE(majority(1, 4).met());  // the paused peer cut off from the other three
    CHECK_FALSE(majority(2, 4).met());  // a 2-2 split: neither half writes
    CHECK(majority(3, 4).met());
    CHECK(majority(2, 3).met());
    CHECK_FALSE(majority(3, 6).met());
    CHECK(majority(4, 6).met());
    CHECK(majority(3, 4).needed == 3);
    // At most one side of any split meets it: two majorities would share a peer.
    for (std::size_t n = 1; n <= 16; ++n)
        for (std::size_t a = 0; a <= n; ++a) {
            CAPTURE(n);
            CAPTURE(a);
            CHECK_FALSE((majority(a, n).met() && majority(n - a, n).met()));
            CHECK(majority(a, n).met() == (2 * a > n));
        }
}

TEST_CASE("membership: a gap in the loop longer than the limit counts as a pause") {
    const PauseWatch::Clock::time_point t0{};
    PauseWatch w(3s, t0);
    for (int k = 1; k <= 10; ++k) w.tick(t0 + k * 1s);  // a loop waking every second
    CHECK_FALSE(w.paused());
    CHECK(w.longest() == 1s);
    w.tick(t0 + 13s);  // exactly the limit is not a pause
    CHECK_FALSE(w.paused());
    w.restart(t0 + 30s);  // work that legitimately does not tick
    w.tick(t0 + 31s);
    CHECK_FALSE(w.paused());
    w.tick(t0 + 51s);  // stopped for 20 s
    CHECK(w.paused());
    CHECK(w.longest() == 20s);
    w.tick(t0 + 52s);  // it stays known
    CHECK(w.paused());
}
