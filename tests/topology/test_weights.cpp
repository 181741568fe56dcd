#include <doctest/doctest.h>

#include <cmath>

#include "gossamer/core/error.hpp"
#include "gossamer/topology/generators.hpp"
#include "gossamer/topology/weights.hpp"

using namespace gossamer::topology;

TEST_CASE("uniform weights: 1/(in-degree + 1), row-stochastic") {
    MixingMatrix w = make_weights(star(5), WeightRule::uniform);
    CHECK(w.at(0, 0) == doctest::Approx(0.2));
    CHECK(w.at(0, 3) == doctest::Approx(0.2));
    CHECK(w.at(3, 3) == doctest::Approx(0.5));
    CHECK(w.at(3, 0) == doctest::Approx(0.5));
    CHECK(w.at(3, 1) == 0.0);
    CHECK(w.row_stochastic());
    CHECK_FALSE(w.column_stochastic());  // the star is not regular
}

TEST_CASE("Metropolis–Hastings weights are symmetric and doubly stochastic on 100 random graphs") {
    for (std::uint64_t seed = 0; seed < 100; ++seed) {
        const int n = 5 + static_cast<int>(seed % 20);
        Digraph g = erdos_renyi(n, 0.35, seed);
        MixingMatrix w = make_weights(g, WeightRule::metropolis_hastings);
        CHECK(w.symmetric());
        CHECK(w.row_stochastic(1e-12));
        CHECK(w.column_stochastic(1e-12));
        CHECK(w.nonnegative());
    }
}

TEST_CASE("max-degree weights are doubly stochastic") {
    MixingMatrix w = make_weights(star(6), WeightRule::max_degree);
    CHECK(w.at(1, 0) == doctest::Approx(1.0 / 6));
    CHECK(w.at(1, 1) == doctest::Approx(5.0 / 6));
    CHECK(w.at(0, 0) == doctest::Approx(1.0 / 6));
    CHECK(w.row_stochastic());
    CHECK(w.column_stochastic());
}

TEST_CASE("push-sum weights have column sums 1 on directed graphs") {
    Digraph g(4, {{0, 1}, {0, 2}, {1, 2}, {2, 3}, {3, 0}});
    MixingMatrix w = make_weights(g, WeightRule::push_sum);
    CHECK(w.column_stochastic(1e-15));
    CHECK(w.at(1, 0) == doctest::Approx(1.0 / 3));  // sender 0 splits three ways
    CHECK(w.at(0, 0) == doctest::Approx(1.0 / 3));
    CHECK_FALSE(w.row_stochastic());
    for (int n : {8, 16})
        for (int t = 0; t < 4; ++t)
            CHECK(
                make_weights(one_peer_exponential(n, t), WeightRule::push_sum).column_stochastic());
}

TEST_CASE("Metropolis–Hastings and max-degree refuse directed graphs") {
    CHECK_THROWS_AS(make_weights(exponential(8), WeightRule::metropolis_hastings),
                    gossamer::TopologyError);
    CHECK_THROWS_AS(make_weights(exponential(8), WeightRule::max_degree), gossamer::TopologyError);
    CHECK_THROWS_AS(make_weights(ring(4), WeightRule::explicit_weights), gossamer::TopologyError);
}

TEST_CASE("check_weights names the row or column that fails") {
    MixingMatrix rows(2, {{0, 0, 0.5}, {0, 1, 0.4}, {1, 1, 1.0}});
    try {
        check_weights(rows, WeightKind::averaging);
        FAIL("expected TopologyError");
    } catch (const gossamer::TopologyError& e) {
        CHECK(std::string(e.what()).find("row 0 of W sums to 0.9") == 0);
    }
    MixingMatrix cols(2, {{0, 0, 0.5}, {1, 0, 0.5}, {1, 1, 0.7}});
    CHECK_THROWS_WITH_AS(check_weights(cols, WeightKind::push_sum),
                         doctest::Contains("column 1 of W sums to 0.7"), gossamer::TopologyError);
    MixingMatrix neg(2, {{0, 0, 1.5}, {0, 1, -0.5}, {1, 1, 1.0}});
    CHECK_THROWS_WITH_AS(check_weights(neg, WeightKind::averaging),
                         doctest::Contains("must be finite and >= 0"), gossamer::TopologyError);
    CHECK_NOTHROW(check_weights(make_weights(ring(5), WeightRule::uniform), WeightKind::averaging));
}

TEST_CASE("a mixing matrix sums repeated entries and applies y = W x") {
    MixingMatrix w(3, {{0, 0, 0.25}, {0, 0, 0.25}, {0, 2, 0.5}, {1, 1, 1.0}, {2, 0, 1.0}});
    CHECK(w.at(0, 0) == 0.5);
    CHECK(w.nonzeros() == 4);
    std::vector<double> x{1, 2, 4}, y(3);
    w.apply(x, y);
    CHECK(y == std::vector<double>{2.5, 2.0, 1.0});
    CHECK(w.dense() == std::vector<double>{0.5, 0, 0.5, 0, 1, 0, 1, 0, 0});
}
