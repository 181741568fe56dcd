#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "gossamer/optimizers/protocol/ring.hpp"

using namespace gossamer::proto;

TEST_CASE("ring segments cover the vector in near-equal parts, some empty when length < n") {
    for (int n = 1; n <= 17; ++n) {
        for (std::size_t length = 0; length <= 40; ++length) {
            std::size_t next = 0, smallest = length, largest = 0;
            for (int s = 0; s < n; ++s) {
                const ring::Range r = ring::segment(length, n, s);
                CHECK(r.begin == next);
                next = r.end;
                smallest = std::min(smallest, r.size());
                largest = std::max(largest, r.size());
                // Chunks of the segment cover it the same way.
                for (int chunks : {1, 3, 8}) {
                    std::size_t at = r.begin;
                    for (int c = 0; c < chunks; ++c) {
                        const ring::Range q = ring::chunk(length, n, s, chunks, c);
                        CHECK(q.begin == at);
                        at = q.end;
                    }
                    CHECK(at == r.end);
                }
            }
            CHECK(next == length);
            CHECK(largest - smallest <= 1);
        }
    }
    CHECK(ring::segment(10, 4, 0) == ring::Range{0, 3});
    CHECK(ring::segment(10, 4, 3) == ring::Range{8, 10});
    CHECK(ring::segment(2, 5, 4).size() == 0);
}

// Runs the schedule on sets of contributions (bit r = peer r's values) instead of numbers.
TEST_CASE("ring schedule: reduce-scatter then all-gather leaves every peer with every sum") {
    for (int n = 1; n <= 17; ++n) {
        CAPTURE(n);
        CHECK(ring::steps(n) == 2 * (n - 1));
        // held[r][s]: whose contributions peer r holds for segment s.
        std::vector<std::vector<std::uint32_t>> held(static_cast<std::size_t>(n));
        for (int r = 0; r < n; ++r) held[r].assign(static_cast<std::size_t>(n), 1u << r);
        const std::uint32_t all = (1u << n) - 1u;
        for (int k = 0; k < ring::steps(n); ++k) {
            auto next = held;
            for (int r = 0; r < n; ++r) {
                const ring::Step s = ring::step(r, n, k);
                CHECK(s.send_to == (r + 1) % n);
                CHECK(s.recv_from == (r + n - 1) % n);
                CHECK(s.reduce == (k < n - 1));
                // What the sender sends at step k is what this peer expects to receive.
                const ring::Step from = ring::step(s.recv_from, n, k);
                REQUIRE(from.send_segment == s.recv_segment);
                const std::uint32_t in = held[s.recv_from][from.send_segment];
                auto& mine = next[r][s.recv_segment];
                if (s.reduce) {
                    CHECK((in & mine) == 0);  // nobody's values are added twice
                    mine |= in;
                } else {
                    CHECK(in == all);  // the all-gather only moves finished sums
                    mine = in;
                }
            }
            held = next;
            if (k == n - 2)
                for (int r = 0; r < n; ++r) CHECK(held[r][ring::owned_segment(r, n)] == all);
        }
        for (int r = 0; r < n; ++r)
            for (int s = 0; s < n; ++s) CHECK(held[r][s] == all);
    }
}
