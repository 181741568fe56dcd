// The simulator's event queue pops in (time, push order), exactly as a reference heap does.
#include <doctest/doctest.h>

#include <cstdint>
#include <queue>
#include <tuple>
#include <vector>

#include "gossamer/core/rng.hpp"
#include "gossamer/sim/event_queue.hpp"

using gossamer::sim::EventQueue;

namespace {

struct Ref {
    double time;
    std::uint64_t seq;
    bool operator>(const Ref& o) const { return std::tie(time, seq) > std::tie(o.time, o.seq); }
};

}  // namespace

TEST_CASE("event queue: random pushes at or after now pop in time order, ties in push order") {
    // Many ties (times on a coarse grid, as a homogeneous cluster makes them), zero delays,
    // times spanning several binades, and pushes interleaved with pops.
    for (std::uint64_t seed : {1, 2, 3, 4}) {
        CAPTURE(seed);
        gossamer::Rng rng(seed);
        EventQueue<std::uint64_t> q;
        std::priority_queue<Ref, std::vector<Ref>, std::greater<>> ref;
        std::uint64_t seq = 0;
        double now = 0;
        std::vector<std::uint64_t> got, want;
        for (int i = 0; i < 20000; ++i) {
            const int pushes = static_cast<int>(rng.next() % 3);
            for (int k = 0; k < pushes || (q.empty() && k < 1); ++k) {
                const auto r = rng.next() % 100;
                const double delay = r < 20   ? 0.0
                                     : r < 60 ? 0.25 * static_cast<double>(r % 8)
                                              : static_cast<double>(rng.next() % 1000) * 1e-3 *
                                                    static_cast<double>(1 + r % 50);
                q.push(now + delay, seq);
                ref.push({now + delay, seq});
                ++seq;
            }
            if (rng.next() % 2 == 0 && !q.empty()) {
                auto [t, e] = q.pop();
                now = t;
                got.push_back(e);
                want.push_back(ref.top().seq);
                CHECK(t == ref.top().time);
                ref.pop();
            }
        }
        while (!q.empty()) {
            auto [t, e] = q.pop();
            got.push_back(e);
            want.push_back(ref.top().seq);
            ref.pop();
        }
        CHECK(ref.empty());
        CHECK(got == want);
        CHECK(q.size() == 0);
    }
}
