// GrowingWindow (growing_window.hpp), the narrow sliding window of async's per-neighbour state:
// the same values, in the same order, as a deque trimmed to the capacity, whatever the capacity,
// the mix of pushes and pops, and copies or moves on the way; and its buffer grows only as it
// fills.
#include <doctest/doctest.h>

#include <cstdint>
#include <deque>
#include <stdexcept>
#include <utility>

#include "gossamer/core/rng.hpp"
#include "gossamer/optimizers/protocol/growing_window.hpp"

using gossamer::proto::GrowingWindow;

namespace {

void check_same(const GrowingWindow<std::int64_t>& w, const std::deque<std::int64_t>& d) {
    REQUIRE(w.size() == d.size());
    CHECK(w.empty() == d.empty());
    for (std::size_t i = 0; i < d.size(); ++i) REQUIRE(w[i] == d[i]);
    if (!d.empty()) {
        CHECK(w.front() == d.front());
        CHECK(w.back() == d.back());
    }
}

}  // namespace

TEST_CASE("growing window: the values of a deque trimmed to the capacity") {
    gossamer::Rng rng(7);
    for (std::size_t cap : {0u, 1u, 2u, 3u, 5u, 17u, 64u, 4098u}) {
        CAPTURE(cap);
        GrowingWindow<std::int64_t> w(cap);
        std::deque<std::int64_t> d;
        for (std::int64_t k = 0; k < 20000; ++k) {
            const auto r = rng.below(100);
            if (r < 10 && !d.empty()) {  // pop_front, as async's history after a join
                w.pop_front();
                d.pop_front();
            } else if (r < 12) {  // a copy and a move carry the same values on
                GrowingWindow<std::int64_t> copy(w);
                check_same(copy, d);
                GrowingWindow<std::int64_t> moved(std::move(copy));
                check_same(moved, d);
                w = moved;
            } else {
                w.push_back(k);
                if (cap > 0) d.push_back(k);
                if (d.size() > cap) d.pop_front();
            }
            check_same(w, d);
            CHECK(w.capacity() == cap);
        }
        // Emptied and reused.
        w.set_capacity(cap);
        d.clear();
        check_same(w, d);
        w.push_back(-1);
        if (cap > 0) d.push_back(-1);
        check_same(w, d);
    }
}

TEST_CASE(
    "growing window: the last value can be overwritten in place, and the capacity is bounded") {
    GrowingWindow<double> w(4);
    w.push_back(1.0);
    w.push_back(2.0);
    w[w.size() - 1] = 3.0;  // async's burst rule replaces the latest arrival
    CHECK(w.size() == 2);
    CHECK(w.back() == 3.0);
    CHECK_THROWS_AS(w.set_capacity(GrowingWindow<double>::kMaxCapacity + 1), std::length_error);
    CHECK(sizeof(GrowingWindow<double>) == 16);
}
