// toy_average added to the conformance suite's binary by one line, as an embedder adds an
// algorithm: the suite (tests/optimizers/conformance/test_conformance.cpp, unchanged) iterates
// the registry, so every contract check runs it too.
#include <doctest/doctest.h>

#include <algorithm>

#include "optimizers/conformance/contract.hpp"
#include "toy_algorithm/toy_average.hpp"

// The one line.
static const bool registered =
    (gossamer::proto::register_algorithm(toy::toy_average_algorithm()), true);

TEST_CASE("the conformance suite's candidates include toy_average, registered by one line") {
    REQUIRE(registered);
    const auto all = gossamer::conformance::registered();
    CHECK(
        std::any_of(all.begin(), all.end(), [](const auto& c) { return c.name == "toy_average"; }));
}
