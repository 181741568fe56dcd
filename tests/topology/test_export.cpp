#include <doctest/doctest.h>

#include "gossamer/topology/export.hpp"
#include "gossamer/topology/generators.hpp"

using namespace gossamer::topology;

TEST_CASE("CSV has one row per receiver and exact weights") {
    auto w = make_weights(star(3), WeightRule::uniform);
    CHECK(to_csv(w) ==
          "0.33333333333333331,0.33333333333333331,0.33333333333333331\n"
          "0.5,0.5,0\n"
          "0.5,0,0.5\n");
}

TEST_CASE("DOT draws undirected graphs once and directed graphs with arrows") {
    Round r{ring(3), make_weights(ring(3), WeightRule::uniform)};
    std::string dot = to_dot(r, "ring");
    CHECK(dot.rfind("graph \"ring\" {", 0) == 0);
    CHECK(dot.find("0 -- 1 [label=\"0.333\"]") != std::string::npos);
    CHECK(dot.find("1 -- 0") == std::string::npos);
    Round d{one_peer_exponential(4, 0),
            make_weights(one_peer_exponential(4, 0), WeightRule::uniform)};
    std::string ddot = to_dot(d, "ope");
    CHECK(ddot.rfind("digraph", 0) == 0);
    CHECK(ddot.find("0 -> 1 [label=\"0.5\"]") != std::string::npos);
}
