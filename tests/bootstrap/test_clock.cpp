// Clock offsets between hosts, estimated at the bootstrap from round trips with rank 0.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <stdexcept>

#include "cluster.hpp"
#include "gossamer/bootstrap/clock.hpp"

using namespace gossamer::test;

namespace {

constexpr std::int64_t kSkewUs = 5'000'000;  // the joiner's clock is 5 s ahead of rank 0's

// One exchange at true time t (rank 0's clock): the query takes `out` us, the answer `back`.
bs::ClockSample exchange(std::int64_t t, std::int64_t out, std::int64_t back, std::int64_t skew) {
    return {t + skew, t + out, t + out + back + skew};
}

}  // namespace

TEST_SUITE("bootstrap") {
    TEST_CASE(
        "clock offset: a 5 s skew is estimated within the residual, from the fastest round trip") {
        std::mt19937_64 rng(7);
        // Asymmetric delays (a loaded link one way): the estimate is off by half the asymmetry,
        // which half the round trip always bounds.
        std::uniform_int_distribution<std::int64_t> delay(20, 40'000);
        for (int trial = 0; trial < 200; ++trial) {
            std::vector<bs::ClockSample> samples;
            std::int64_t t = 1'700'000'000'000'000 + trial * 1'000'000;
            for (int k = 0; k < 8; ++k) {
                samples.push_back(exchange(t, delay(rng), delay(rng), kSkewUs));
                t += 50'000;
            }
            const auto c = bs::estimate_offset(samples);
            CHECK(c.samples == 8);
            // Rank 0's time = this peer's + offset: -5 s.
            CHECK(std::abs(c.offset_us - (-kSkewUs)) <= c.residual_us);
            std::int64_t fastest = samples[0].received_us - samples[0].sent_us;
            for (const auto& s : samples) fastest = std::min(fastest, s.received_us - s.sent_us);
            CHECK(c.residual_us == doctest::Approx(fastest / 2.0));
        }
        // Symmetric delays give the skew exactly.
        const std::vector<bs::ClockSample> even{exchange(0, 300, 300, -kSkewUs),
                                                exchange(1000, 90, 90, -kSkewUs)};
        const auto c = bs::estimate_offset(even);
        CHECK(c.offset_us == doctest::Approx(kSkewUs));
        CHECK(c.residual_us == doctest::Approx(90));
    }

    TEST_CASE("clock offset: no samples, or a clock that went back, is an error") {
        CHECK_THROWS_AS(bs::estimate_offset({}), std::invalid_argument);
        const std::vector<bs::ClockSample> back{{1000, 1500, 900}};
        CHECK_THROWS_WITH_AS(bs::estimate_offset(back),
                             "estimate_offset: a sample received 100 us before it was sent (the "
                             "clock went back)",
                             std::invalid_argument);
    }

    TEST_CASE("the rendezvous measures each joiner's clock offset to rank 0 with injected skews") {
        // Rank 1's clock 5 s ahead, rank 2's 3 s behind, rank 3's right: on one host, so the
        // true offsets are exactly minus the skews.
        const std::vector<std::int64_t> skew{0, kSkewUs, -3'000'000, 0};
        auto peers = start_peers(4, [&](int r, std::vector<bs::Endpoint> eps) {
            auto o = quick_options(r, std::move(eps));
            o.clock_skew = std::chrono::microseconds(skew[static_cast<std::size_t>(r)]);
            o.clock_samples = 5;
            return std::optional<bs::Options>(o);
        });
        auto outcomes = rendezvous_all(peers);
        for (const auto& o : outcomes) REQUIRE_MESSAGE(!o.failed, o.error);
        const auto root = peers[0]->clock_offset();
        CHECK(root.samples == 0);
        CHECK(root.offset_us == 0);
        CHECK(root.residual_us == 0);
        for (int r = 1; r < 4; ++r) {
            CAPTURE(r);
            const auto c = peers[static_cast<std::size_t>(r)]->clock_offset();
            CHECK(c.samples == 5);
            CHECK(c.residual_us > 0);
            CHECK(c.residual_us < 500'000);  // loopback: well under a second even when loaded
            CHECK_MESSAGE(
                std::abs(c.offset_us + static_cast<double>(skew[static_cast<std::size_t>(r)])) <=
                    c.residual_us,
                c.offset_us);
        }
    }

    TEST_CASE("clock_samples under 1 is refused") {
        auto o = quick_options(0, free_endpoints(2));
        o.clock_samples = 0;
        CHECK_THROWS_WITH_AS(bs::Bootstrap{o}, doctest::Contains("clock_samples"),
                             gossamer::ConfigError);
    }
}
