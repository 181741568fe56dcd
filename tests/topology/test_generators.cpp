#include <doctest/doctest.h>

#include <string>

#include "gossamer/core/error.hpp"
#include "gossamer/topology/generators.hpp"
#include "gossamer/topology/schedule.hpp"

using namespace gossamer::topology;

TEST_CASE("families have the expected degrees and connectivity") {
    for (int n : {3, 5, 8, 17}) {
        Digraph g = ring(n);
        CHECK(g.symmetric());
        for (int i = 0; i < n; ++i) CHECK(g.out_degree(i) == 2);
        CHECK(strongly_connected(g));
    }
    CHECK(ring(2).edges().size() == 2);  // one undirected edge, both directions
    Digraph t = torus(4, 4);
    for (int i = 0; i < 16; ++i) CHECK(t.out_degree(i) == 4);
    CHECK(torus(2, 3).out_degree(0) == 3);  // wrap-around duplicates merge
    Digraph h = hypercube(16);
    for (int i = 0; i < 16; ++i) CHECK(h.out_degree(i) == 4);
    Digraph k = complete(6);
    CHECK(k.edges().size() == 30);
    Digraph s = star(5);
    CHECK(s.out_degree(0) == 4);
    CHECK(s.out_degree(3) == 1);
    Digraph e = exponential(16);
    CHECK_FALSE(e.symmetric());
    CHECK(e.has_edge(3, 3 + 8));
    CHECK(e.out_degree(0) == 4);
    CHECK(exponential(12).out_degree(0) == 4);  // hops 1, 2, 4, 8
    CHECK(symmetric_exponential(16).symmetric());
}

TEST_CASE("one-peer exponential sends to i + 2^(t mod log2 n)") {
    for (std::int64_t t = 0; t < 8; ++t) {
        Digraph g = one_peer_exponential(8, t);
        const int hop = 1 << (t % 3);
        for (int i = 0; i < 8; ++i) {
            REQUIRE(g.out_degree(i) == 1);
            CHECK(g.out_neighbors(i)[0] == (i + hop) % 8);
            CHECK(g.in_neighbors(i)[0] == (i - hop + 8) % 8);
        }
    }
}

TEST_CASE("families that need a power of two say so with a fix") {
    try {
        one_peer_exponential(12, 0);
        FAIL("expected TopologyError");
    } catch (const gossamer::TopologyError& e) {
        CHECK(std::string(e.what()) ==
              "one_peer_exponential needs n to be a power of two, got n = 12; use n = 8 or n = 16");
    }
    CHECK_THROWS_AS(hypercube(6), gossamer::TopologyError);
}

TEST_CASE("random matching is seeded, a matching, and differs between rounds") {
    Digraph a = random_matching(9, 3, 5), b = random_matching(9, 3, 5),
            c = random_matching(9, 3, 6);
    CHECK(a.edges() == b.edges());
    CHECK(a.edges() != c.edges());
    int unmatched = 0;
    for (int i = 0; i < 9; ++i) {
        CHECK(a.out_degree(i) <= 1);
        unmatched += a.out_degree(i) == 0;
    }
    CHECK(unmatched == 1);
}

TEST_CASE("Erdős–Rényi is seeded and connected, or a clear error") {
    Digraph a = erdos_renyi(30, 0.2, 7), b = erdos_renyi(30, 0.2, 7);
    CHECK(a.edges() == b.edges());
    CHECK(strongly_connected(a));
    try {
        erdos_renyi(50, 0.01, 1);
        FAIL("expected TopologyError");
    } catch (const gossamer::TopologyError& e) {
        CHECK(std::string(e.what()).find("not connected in 100 draws") != std::string::npos);
        CHECK(std::string(e.what()).find("use p >=") != std::string::npos);
    }
}

TEST_CASE("generated schedules have the right periods") {
    FamilySpec s;
    s.n = 16;
    s.family = "one_peer_exponential";
    CHECK(generate(s)->period() == 4);
    s.family = "ring";
    CHECK(generate(s)->period() == 1);
    s.family = "random_matching";
    auto rm = generate(s);
    CHECK_FALSE(rm->period().has_value());
    CHECK(rm->at(1000000000)->graph.n() == 16);  // at(t) is cheap for any t
    s.family = "torus";
    s.rows = 3;
    CHECK_THROWS_AS(generate(s), gossamer::TopologyError);  // 3 does not divide 16
    s.rows = 2;
    CHECK(generate(s)->at(0)->graph.out_degree(0) == 3);  // 2 x 8
    s.family = "nope";
    CHECK_THROWS_AS(generate(s), gossamer::TopologyError);
}

TEST_CASE("helpers: powers of two and square factors") {
    CHECK(is_power_of_two(1));
    CHECK(is_power_of_two(1024));
    CHECK_FALSE(is_power_of_two(12));
    CHECK(floor_log2(1023) == 9);
    CHECK(square_factors(16) == std::pair{4, 4});
    CHECK(square_factors(12) == std::pair{3, 4});
    CHECK(square_factors(7) == std::pair{1, 7});
}

TEST_CASE("the base graph is the union over one period, computed once and shared") {
    FamilySpec s;
    s.n = 16;
    s.family = "one_peer_exponential";  // round t: i -> i + 2^(t mod 4)
    auto sched = generate(s);
    const Digraph& base = sched->base_graph();
    CHECK(&base == &sched->base_graph());  // one copy for every caller
    CHECK(base.n() == 16);
    for (int i = 0; i < 16; ++i) {
        CAPTURE(i);
        CHECK(base.out_degree(i) == 4);
        for (int k : {1, 2, 4, 8}) CHECK(base.has_edge(i, (i + k) % 16));
    }
    // No period: the first 64 rounds.
    s.family = "random_matching";
    auto rm = generate(s);
    std::vector<const Digraph*> first;
    std::vector<std::shared_ptr<const Round>> keep;
    for (std::int64_t t = 0; t < Schedule::kBaseRounds; ++t) {
        keep.push_back(rm->at(t));
        first.push_back(&keep.back()->graph);
    }
    CHECK(rm->base_graph().edges() == graph_union(first).edges());
}

TEST_CASE("check_once runs a whole-schedule check once per key and keeps its answer") {
    FamilySpec s;
    s.n = 8;
    s.family = "ring";
    auto sched = generate(s);
    int runs = 0;
    const auto failing = [&runs]() -> std::string {
        ++runs;
        return "not a chain";
    };
    CHECK(sched->check_once("a", failing) == "not a chain");
    CHECK(sched->check_once("a", failing) == "not a chain");  // the first answer, not a rerun
    CHECK(runs == 1);
    CHECK(sched
              ->check_once("b",
                           [&runs]() -> std::string {
                               ++runs;
                               return {};
                           })
              .empty());
    CHECK(runs == 2);  // another key is another check
    CHECK(sched->check_once("b", failing).empty());
    CHECK(runs == 2);
    // Another schedule keeps its own answers.
    auto other = generate(s);
    CHECK(other->check_once("a", [] { return std::string{}; }).empty());
}
