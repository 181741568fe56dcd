// The fair network's per-edge lines: each edge delivers in the order of its sends, one in flight
// at a time, exactly as a map of queues does (the engine's std::deque per edge before issue 39).
#include <doctest/doctest.h>

#include <cstdint>
#include <deque>
#include <map>

#include "gossamer/core/rng.hpp"
#include "gossamer/sim/edge_lines.hpp"

using gossamer::sim::EdgeLines;

TEST_CASE("edge lines: random sends and completions keep each edge's order, as queues do") {
    // Few edges (long lines, a key reused after its line closed) and many (the table grows,
    // probes wrap and backward shifts move entries), keys dense like from * n + to.
    for (const std::uint64_t edges : {std::uint64_t{3}, std::uint64_t{50}, std::uint64_t{5000}}) {
        CAPTURE(edges);
        gossamer::Rng rng(edges);
        EdgeLines<int> lines;
        std::map<std::uint64_t, std::deque<int>> ref;  // front: the message in flight
        int next = 0;
        for (int op = 0; op < 200000; ++op) {
            const std::uint64_t edge = rng.below(edges);
            if (rng.uniform() < 0.55) {
                auto& q = ref[edge];
                const bool idle = q.empty();
                q.push_back(next);
                CHECK(lines.push(edge, next) == idle);
                ++next;
            } else if (auto it = ref.find(edge); it != ref.end() && !it->second.empty()) {
                it->second.pop_front();
                const int* started = lines.pop(edge);
                if (it->second.empty()) {
                    CHECK(started == nullptr);
                    ref.erase(it);
                } else {
                    REQUIRE(started != nullptr);
                    CHECK(*started == it->second.front());
                }
            }
            REQUIRE(lines.busy() == ref.size());
        }
    }
}
