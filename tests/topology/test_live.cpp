// The live part of a topology (docs/algorithms/dpsgd.md, "Weights over the live graph").
#include <doctest/doctest.h>

#include <cmath>

#include "gossamer/core/error.hpp"
#include "gossamer/topology/live.hpp"

using namespace gossamer;
using namespace gossamer::topology;

namespace {

std::shared_ptr<const Schedule> family(const char* name, int n, WeightRule rule) {
    FamilySpec f;
    f.family = name;
    f.n = n;
    f.weights = rule;
    return generate(f);
}

}  // namespace

TEST_CASE("live part of a ring: absent senders' weights go to the receiver's own") {
    const auto ring = family("ring", 6, WeightRule::metropolis_hastings);
    const auto live = live_schedule(*ring, {0, 1, 2, 4});
    REQUIRE(live->n() == 4);
    const auto r = live->at(0);
    const auto& w = r->weights;
    // Rank 0 (index 0) lost its neighbour 5; rank 2 (index 2) lost 3; rank 4 (index 3) both.
    CHECK(w.at(0, 1) == ring->at(0)->weights.at(0, 1));
    CHECK(std::abs(w.at(0, 0) - (ring->at(0)->weights.at(0, 0) + ring->at(0)->weights.at(0, 5))) <
          1e-15);
    CHECK(w.at(3, 3) == doctest::Approx(1.0));
    CHECK(w.row_stochastic());
    CHECK(w.column_stochastic());  // symmetric W stays doubly stochastic
    CHECK(r->graph.has_edge(0, 1));
    CHECK_FALSE(r->graph.has_edge(2, 3));  // ranks 2 and 4 were not neighbours
    const auto line = describe_live(analyse_live(*ring, {0, 1, 2, 4}), {0, 1, 2, 4}, 6, 3);
    CAPTURE(line);
    CHECK(line.rfind("topology version 3: 4 of 6 peers live (ranks 0, 1, 2, 4): NOT strongly "
                     "connected",
                     0) == 0);
    const std::vector<int> all = {0, 1, 2, 3, 4, 5};
    CHECK(describe_live(analyse_live(*ring, all), all, 6, 0)
              .find("strongly connected, spectral gap") != std::string::npos);
}

TEST_CASE("live part of a push-sum schedule: absent receivers' weights stay with the sender") {
    const auto ops = family("one_peer_exponential", 8, WeightRule::push_sum);
    const auto live = live_schedule(*ops, {0, 2, 3, 5, 6, 7});
    CHECK(live->kind() == WeightKind::push_sum);
    CHECK(live->period() == ops->period());
    for (std::int64_t t = 0; t < *live->period(); ++t) {
        CAPTURE(t);
        CHECK(live->at(t)->weights.column_stochastic());
    }
}

TEST_CASE("live_schedule: bad live sets throw") {
    const auto ring = family("ring", 4, WeightRule::uniform);
    CHECK_THROWS_AS(live_schedule(*ring, {}), TopologyError);
    CHECK_THROWS_AS(live_schedule(*ring, {2, 1}), TopologyError);
    CHECK_THROWS_AS(live_schedule(*ring, {0, 4}), TopologyError);
}
