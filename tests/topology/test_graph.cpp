#include <doctest/doctest.h>

#include "gossamer/core/error.hpp"
#include "gossamer/topology/graph.hpp"

using namespace gossamer::topology;

TEST_CASE("a digraph sorts, merges duplicates and indexes neighbours both ways") {
    Digraph g(4, {{0, 1}, {2, 1}, {0, 1}, {1, 3}});
    CHECK(g.edges().size() == 3);
    CHECK(g.out_degree(0) == 1);
    CHECK(g.in_degree(1) == 2);
    CHECK(g.in_neighbors(1)[0] == 0);
    CHECK(g.in_neighbors(1)[1] == 2);
    CHECK(g.has_edge(1, 3));
    CHECK_FALSE(g.has_edge(3, 1));
    CHECK_FALSE(g.symmetric());
    CHECK(Digraph::undirected(3, {{0, 1}, {1, 2}}).symmetric());
}

TEST_CASE("self-loops and ranks out of range are refused") {
    CHECK_THROWS_AS(Digraph(3, {{0, 0}}), gossamer::TopologyError);
    CHECK_THROWS_AS(Digraph(3, {{0, 3}}), gossamer::TopologyError);
    CHECK_THROWS_AS(Digraph(3, {{-1, 2}}), gossamer::TopologyError);
    CHECK_THROWS_AS(Digraph(0, {}), gossamer::TopologyError);
}

TEST_CASE("strong connectivity and the union of graphs") {
    Digraph path(3, {{0, 1}, {1, 2}});
    CHECK_FALSE(strongly_connected(path));
    CHECK(strong_component_count(path) == 3);
    Digraph back(3, {{2, 0}});
    const Digraph* both[] = {&path, &back};
    CHECK(strongly_connected(graph_union(both)));
    CHECK(strongly_connected(Digraph(1, {})));
    CHECK(strong_component_count(Digraph(2, {})) == 2);
}
