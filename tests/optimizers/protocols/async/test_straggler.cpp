// The pure straggler-aware helpers: the self-share formula, the edge bound and target choice.
#include <doctest/doctest.h>

#include <map>
#include <vector>

#include "gossamer/optimizers/protocols/async/straggler.hpp"

using namespace gossamer::proto;

TEST_CASE("the self share is base_self unless the peer is slower than its neighbours") {
    CHECK(straggler_self_share(0.5, 1.0, 1.0, 1.0) == 0.5);
    CHECK(straggler_self_share(0.5, 1.0, 2.0, 1.0) == 0.5);  // faster
    CHECK(straggler_self_share(0.5, 1.0, 0.0, 1.0) == 0.5);  // not measured yet
    CHECK(straggler_self_share(0.5, 1.0, 1.0, 0.0) == 0.5);
    // Four times slower, beta = 1: pushes (1 - b) rho = 0.5 * 0.25.
    CHECK(straggler_self_share(0.5, 1.0, 0.25, 1.0) == doctest::Approx(1 - 0.125));
    CHECK(straggler_self_share(0.5, 2.0, 0.25, 1.0) == doctest::Approx(0.5 + 0.5 * 0.5625));
    // Monotone in the lag, and always below 1 while the peer makes progress.
    double prev = 0;
    for (double rho = 1.0; rho > 0.001; rho *= 0.8) {
        const double s = straggler_self_share(0.4, 0.7, rho, 1.0);
        CHECK(s >= prev);
        CHECK(s < 1.0);
        prev = s;
    }
}

TEST_CASE("the edge bound is at least one sweep over the out-edges") {
    CHECK(effective_edge_bound(0, 4, 1) == 8);
    CHECK(effective_edge_bound(0, 4, 3) == 4);
    CHECK(effective_edge_bound(2, 4, 1) == 4);
    CHECK(effective_edge_bound(10, 4, 1) == 10);
    CHECK(edge_force_age(10, 4, 1) == 7);
    CHECK(edge_force_age(4, 4, 1) == 1);
}

TEST_CASE("pick_targets forces overdue edges and keeps every gap within the bound") {
    gossamer::Rng rng(3);
    // Peer 9 is tiny-weighted: only the bound brings it in.
    std::vector<EdgeCandidate> c = {{1, -1, 1.0}, {2, -1, 1.0}, {5, -1, 1.0}, {9, -1, 1e-9}};
    for (int k : {1, 2}) {
        for (std::int64_t B : {2, 3, 5, 9}) {
            CAPTURE(k);
            CAPTURE(B);
            for (auto& e : c) e.last_used = -1;
            const std::int64_t bound = effective_edge_bound(B, 4, k);
            const std::int64_t age = edge_force_age(bound, 4, k);
            std::map<int, int> count;
            for (std::int64_t t = 0; t < 200; ++t) {
                const auto picked = pick_targets(c, k, t, age, rng);
                CHECK(picked.size() == static_cast<std::size_t>(k));
                for (int p : picked) {
                    ++count[p];
                    for (auto& e : c)
                        if (e.peer == p) e.last_used = t;
                }
                for (const auto& e : c) CHECK(t - e.last_used < bound);
            }
            CHECK(count[9] <= 200 / age + 1);  // used only when forced
        }
    }
    CHECK(pick_targets(c, 5, 0, 100, rng).size() == 4);
    CHECK(pick_targets({}, 1, 0, 1, rng).empty());
}

TEST_CASE("quantile is the nearest rank") {
    CHECK(quantile({}, 0.9) == 0.0);
    CHECK(quantile({3, 1, 2}, 1.0) == 3.0);
    CHECK(quantile({3, 1, 2}, 0.5) == 2.0);
    CHECK(quantile({4, 1, 3, 2, 5, 6, 7, 8, 9, 10}, 0.9) == 9.0);
}
