#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "gossamer/core/rng.hpp"

using gossamer::Rng;

TEST_CASE("the same seed gives the same sequence, another seed another") {
    Rng a(42), b(42), c(43);
    bool differs = false;
    for (int i = 0; i < 100; ++i) {
        auto x = a.next();
        CHECK(x == b.next());
        differs = differs || x != c.next();
    }
    CHECK(differs);
}

TEST_CASE("uniform, below and normal have the right ranges and moments") {
    Rng r(7);
    double sum = 0, sq = 0;
    std::vector<int> counts(5, 0);
    const int n = 200000;
    for (int i = 0; i < n; ++i) {
        double u = r.uniform();
        REQUIRE(u >= 0.0);
        REQUIRE(u < 1.0);
        auto k = r.below(5);
        REQUIRE(k < 5);
        ++counts[k];
        double z = r.normal();
        sum += z;
        sq += z * z;
    }
    for (int c : counts) CHECK(std::abs(c - n / 5) < n / 50);
    CHECK(std::abs(sum / n) < 0.01);
    CHECK(std::abs(sq / n - 1.0) < 0.02);
}

TEST_CASE("derived seeds differ per index") {
    CHECK(gossamer::derive_seed(1, 0) != gossamer::derive_seed(1, 1));
    CHECK(gossamer::derive_seed(1, 0) != gossamer::derive_seed(2, 0));
    CHECK(gossamer::derive_seed(5, 9) == gossamer::derive_seed(5, 9));
}
