#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <numbers>
#include <numeric>

#include "gossamer/core/rng.hpp"
#include "gossamer/topology/analysis.hpp"
#include "gossamer/topology/generators.hpp"
#include "gossamer/topology/spectral.hpp"

using namespace gossamer::topology;

namespace {

std::shared_ptr<const Schedule> family(const std::string& name, int n,
                                       WeightRule w = WeightRule::uniform) {
    FamilySpec s;
    s.family = name;
    s.n = n;
    s.weights = w;
    return generate(s);
}

}  // namespace

TEST_CASE("ring with uniform weights: SLEM = 1/3 + 2/3 cos(2 pi / n)") {
    for (int n = 3; n <= 40; ++n) {
        const double expected = 1.0 / 3 + 2.0 / 3 * std::cos(2 * std::numbers::pi / n);
        auto w = make_weights(ring(n), WeightRule::uniform);
        CHECK(slem(w.dense(), n) == doctest::Approx(expected).epsilon(1e-10));
    }
}

TEST_CASE("complete graph with uniform weights: SLEM = 0") {
    for (int n : {2, 5, 16}) {
        auto report = analyse(*family("complete", n));
        REQUIRE(report.slem.has_value());
        CHECK(*report.slem == doctest::Approx(0.0).epsilon(1e-12));
        CHECK(*report.spectral_gap == doctest::Approx(1.0));
        CHECK(report.rounds_to_target == 1);
    }
}

TEST_CASE("hypercube: the known spectrum (1 + k - 2m)/(k + 1) with multiplicity C(k, m)") {
    for (int k = 1; k <= 6; ++k) {
        const int n = 1 << k;
        auto ev = eigenvalues(make_weights(hypercube(n), WeightRule::uniform).dense(), n);
        std::vector<double> got;
        for (auto z : ev) {
            CHECK(std::abs(z.imag()) < 1e-12);
            got.push_back(z.real());
        }
        std::vector<double> expected;
        for (int m = 0; m <= k; ++m) {
            // C(k, m) copies of the eigenvalue for m flipped bits.
            double c = 1;
            for (int i = 0; i < m; ++i) c = c * (k - i) / (i + 1);
            for (int copy = 0; copy < static_cast<int>(std::lround(c)); ++copy)
                expected.push_back((1.0 + k - 2 * m) / (k + 1));
        }
        std::sort(got.begin(), got.end());
        std::sort(expected.begin(), expected.end());
        REQUIRE(got.size() == expected.size());
        for (std::size_t i = 0; i < got.size(); ++i)
            CHECK(got[i] == doctest::Approx(expected[i]).epsilon(1e-10));
        if (k > 1)
            CHECK(slem(make_weights(hypercube(n), WeightRule::uniform).dense(), n) ==
                  doctest::Approx((k - 1.0) / (k + 1)));
    }
}

TEST_CASE("one-peer exponential with n = 2^k averages exactly after k rounds") {
    for (int k = 1; k <= 8; ++k) {
        const int n = 1 << k;
        auto s = family("one_peer_exponential", n);
        gossamer::Rng rng(static_cast<std::uint64_t>(k));
        std::vector<double> x(static_cast<std::size_t>(n)), y(x.size());
        for (auto& v : x) v = rng.normal() * 100;
        const double mean = std::accumulate(x.begin(), x.end(), 0.0) / n;
        for (int t = 0; t < k; ++t) {
            s->at(t)->weights.apply(x, y);
            x.swap(y);
        }
        double err = 0;
        for (double v : x) err = std::max(err, std::abs(v - mean));
        CHECK(err <= 1e-12 * 100);
        CHECK(rounds_to_consensus(*s, 1e-6, 1000, 1) == k);
        auto report = analyse(*s);
        CHECK(report.period == k);
        CHECK(*report.slem == 0.0);
        CHECK(report.directed == (n > 2));
        CHECK(report.row_stochastic);
        CHECK(report.column_stochastic);
    }
}

TEST_CASE("the report of a time-varying schedule uses the product over one period") {
    auto s = family("one_peer_exponential", 16);
    auto report = analyse(*s);
    CHECK(report.rounds_examined == 4);
    CHECK(report.connected_rounds == 1);  // only the hop-1 round is a cycle
    CHECK(report.strongly_connected);
    CHECK(report.max_degree == 1);
    CHECK(report.bytes_per_round_max == doctest::Approx(4 << 20));
}

TEST_CASE("a random schedule's rate is an estimate, and says so") {
    auto s = family("random_matching", 32);
    AnalysisOptions o;
    o.sample_rounds = 128;
    auto report = analyse(*s, o);
    CHECK_FALSE(report.period.has_value());
    CHECK(report.spectral_estimate);
    CHECK(report.rounds_examined == 128);
    REQUIRE(report.slem.has_value());
    CHECK(*report.slem > 0.3);
    CHECK(*report.slem < 0.95);
    CHECK(report.connected_rounds == 0);  // a matching alone never is
    CHECK(report.strongly_connected);
    CHECK(to_json(report)["spectral_estimate"] == true);
    CHECK(to_json(report)["period"].is_null());
}

TEST_CASE("stochasticity, symmetry and traffic are reported") {
    AnalysisOptions o;
    o.model_bytes = 1000;
    auto report = analyse(*family("star", 5), o);
    CHECK(report.row_stochastic);
    CHECK_FALSE(report.column_stochastic);
    CHECK_FALSE(report.symmetric);  // 1/5 one way, 1/2 the other
    CHECK_FALSE(report.directed);
    CHECK(report.max_degree == 4);
    CHECK(report.bytes_per_round_max == doctest::Approx(4000));
    CHECK(report.bytes_per_round_mean == doctest::Approx(8000.0 / 5));
    auto mh = analyse(*family("star", 5, WeightRule::metropolis_hastings));
    CHECK(mh.symmetric);
    CHECK(mh.column_stochastic);
    auto ps = analyse(*family("exponential", 8, WeightRule::push_sum));
    CHECK(ps.kind == WeightKind::push_sum);
    CHECK(ps.column_stochastic);
    REQUIRE(ps.rounds_to_target.has_value());
}

TEST_CASE("the averaging run reports a cap it could not beat") {
    AnalysisOptions o;
    o.max_rounds = 10;
    auto report = analyse(*family("ring", 64), o);
    CHECK_FALSE(report.rounds_to_target.has_value());
    CHECK(to_json(report)["rounds_to_1e-6"].is_null());
    CHECK(to_text(report).find("not reached in 10 rounds") != std::string::npos);
}

TEST_CASE("the JSON report has every documented key") {
    auto j = to_json(analyse(*family("torus", 16)));
    for (const char* key : {"n", "period", "directed", "strongly_connected", "row_stochastic",
                            "column_stochastic", "symmetric", "slem", "spectral_gap",
                            "rounds_to_1e-6", "max_degree", "rate_per_round", "bytes_per_round"})
        CHECK_MESSAGE(j.contains(key), key);
    CHECK(j["n"] == 16);
    CHECK(j["slem"].get<double>() == doctest::Approx(0.6));
}

TEST_CASE("the spectrum is skipped above the dense limit, with a note") {
    AnalysisOptions o;
    o.dense_limit = 8;
    auto report = analyse(*family("ring", 16), o);
    CHECK_FALSE(report.slem.has_value());
    CHECK(report.spectral_note.find("dense limit") != std::string::npos);
}

TEST_CASE("a large ring's averaging run is bounded by its work, says so, and reports progress") {
    AnalysisOptions o;
    o.max_work = 40'000'000;  // 500 rounds of a 20,000-peer ring (3 nonzeros per row, plus n)
    std::vector<std::string> updates;
    o.update = [&](std::string_view line) { updates.emplace_back(line); };
    const auto report = analyse(*family("ring", 20000), o);
    CHECK(report.max_rounds == 500);
    CHECK_FALSE(report.rounds_to_target.has_value());
    CHECK(report.rounds_note.find("bounded to 500 rounds for n = 20000") != std::string::npos);
    CHECK(to_json(report)["rounds_note"] == report.rounds_note);
    CHECK(to_text(report).find("not reached in 500 rounds (averaging run bounded") !=
          std::string::npos);
    // The progress line moves: a line every 2e7 multiply-adds, the round growing.
    REQUIRE(updates.size() >= 2);
    CHECK(updates.front().find("averaging run: round 250 of at most 500") == 0);
    CHECK(updates.back().find("round 500 of at most 500") != std::string::npos);
    // Unbounded (max_work 0) keeps max_rounds; small topologies are not bounded by default.
    o.max_work = 0;
    o.max_rounds = 20;
    o.update = nullptr;
    CHECK(analyse(*family("ring", 20000), o).max_rounds == 20);
    CHECK(analyse(*family("ring", 64)).rounds_note.empty());
}
