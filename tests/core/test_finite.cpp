// The finiteness check that guards what peers send and take in (docs/operations/reliability.md): it
// finds the first NaN or infinity wherever it sits (SIMD body, masked tail, block boundaries) and
// never reports a finite value, however large or small.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gossamer/core/finite.hpp"

using gossamer::first_non_finite;

namespace {

std::vector<float> finite_values(std::size_t n) {
    std::vector<float> v(n);
    const float extremes[] = {std::numeric_limits<float>::max(),
                              -std::numeric_limits<float>::max(),
                              std::numeric_limits<float>::denorm_min(),
                              -0.0f,
                              0.0f,
                              std::numeric_limits<float>::min(),
                              1e-30f,
                              -3.5f};
    for (std::size_t i = 0; i < n; ++i) v[i] = extremes[i % 8];
    return v;
}

}  // namespace

TEST_CASE("finite: every finite value passes, the largest and the denormals included") {
    for (std::size_t n : {0u, 1u, 7u, 15u, 16u, 17u, 63u, 64u, 65u, 4095u, 4096u, 4097u, 10000u}) {
        CAPTURE(n);
        CHECK_FALSE(first_non_finite(finite_values(n)).has_value());
    }
}

TEST_CASE("finite: the first NaN or infinity is found at every position of odd-sized vectors") {
    const float bad[] = {
        std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
        -std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::quiet_NaN()};
    for (std::size_t n : {1u, 5u, 16u, 33u, 130u}) {
        for (std::size_t at = 0; at < n; ++at) {
            for (float b : bad) {
                auto v = finite_values(n);
                v[at] = b;
                CAPTURE(n);
                CAPTURE(at);
                const auto k = first_non_finite(v);
                REQUIRE(k.has_value());
                CHECK(*k == at);
            }
        }
    }
}

TEST_CASE("finite: block boundaries and a later second culprit: the first one is named") {
    for (std::size_t at : {4095u, 4096u, 4097u, 8191u, 12287u, 20000u}) {
        auto v = finite_values(20001);
        v[at] = std::numeric_limits<float>::infinity();
        v[20000] = std::numeric_limits<float>::quiet_NaN();
        CAPTURE(at);
        const auto k = first_non_finite(v);
        REQUIRE(k.has_value());
        CHECK(*k == at);
        CHECK(std::string(gossamer::non_finite_name(v[*k])) == (at == 20000 ? "NaN" : "+inf"));
    }
    CHECK(std::string(gossamer::non_finite_name(-std::numeric_limits<float>::infinity())) ==
          "-inf");
}
