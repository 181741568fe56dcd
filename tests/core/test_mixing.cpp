// Mixing kernels: every dispatch path and store policy against a double-precision reference.
//
// Tolerance (docs/modules/mixing.md): a result of k terms plus the self term is a float dot product
// of length m = k + 1, so |float - exact| <= m * u * sum_j |w_j * b_j| with u = 2^-24 (Higham's
// gamma_m, first order). The tests allow twice that: (k + 2) * FLT_EPSILON * sum_j |w_j * b_j|.
#include <doctest/doctest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gossamer/core/error.hpp"
#include "gossamer/core/mixing.hpp"
#include "gossamer/core/params.hpp"
#include "gossamer/core/rng.hpp"

using namespace gossamer;

namespace {

constexpr std::size_t kMaxOffset = 16;  // floats; 16 floats = one 64-byte line

// Every path this machine runs, each with both store policies.
std::vector<Mixer> all_mixers() {
    std::vector<Mixer> out;
    for (SimdIsa isa : {SimdIsa::scalar, SimdIsa::avx2, SimdIsa::avx512}) {
        if (!simd_isa_supported(isa)) {
            MESSAGE("this CPU or build does not run ", std::string(to_string(isa)),
                    "; not tested here");
            continue;
        }
        out.emplace_back(isa, StorePolicy::regular);
        out.emplace_back(isa, StorePolicy::streaming);
    }
    return out;
}

std::string name(const Mixer& m) {
    return std::string(to_string(m.isa())) +
           (m.stores() == StorePolicy::streaming ? "/streaming" : "/regular");
}

// A 64-byte aligned random buffer with room for kMaxOffset extra floats.
ParamVector random_buffer(std::size_t n, std::uint64_t seed) {
    ParamVector v(n + kMaxOffset);
    Rng rng(seed);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(2 * rng.uniform() - 1);
    return v;
}

struct Case {
    std::vector<ParamVector> bufs;  // bufs[0] is x (or out), bufs[1 + j] term j
    std::vector<float> weights;     // weights[0] is w_self
};

Case make_case(std::size_t n, std::size_t k, std::uint64_t seed) {
    Case c;
    Rng rng(seed);
    for (std::size_t j = 0; j <= k; ++j) {
        c.bufs.push_back(random_buffer(n, seed * 100 + j));
        c.weights.push_back(static_cast<float>(2 * rng.uniform() - 1));
    }
    return c;
}

// How far the result is past the tolerance at its worst element (<= 1 passes).
double worst_error(std::span<const float> got, std::span<const float> x0, float w_self,
                   const std::vector<MixTerm>& terms, bool read_x) {
    double worst = 0;
    const double k = static_cast<double>(terms.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        double exact = read_x ? double(w_self) * x0[i] : 0.0;
        double mag = std::abs(exact);
        for (const auto& t : terms) {
            exact += double(t.weight) * t.data[i];
            mag += std::abs(double(t.weight) * t.data[i]);
        }
        const double tol = (k + 2) * FLT_EPSILON * mag + std::numeric_limits<float>::denorm_min();
        if (!std::isfinite(got[i])) return std::numeric_limits<double>::infinity();
        worst = std::max(worst, std::abs(got[i] - exact) / tol);
    }
    return worst;
}

// Runs mix (or mix_into) for one length, term count and set of offsets on every path.
void check_all_paths(std::size_t n, std::size_t k, std::size_t x_offset, bool into) {
    Case c = make_case(n, k, 1000 * n + 10 * k + x_offset);
    std::vector<MixTerm> terms;
    for (std::size_t j = 0; j < k; ++j) {
        const std::size_t off = (x_offset * 3 + 5 * j) % kMaxOffset;  // terms misaligned apart
        terms.push_back({c.bufs[1 + j].slice(off, n), c.weights[1 + j]});
    }
    const std::vector<float> x0(c.bufs[0].data() + x_offset, c.bufs[0].data() + x_offset + n);
    std::vector<float> first;  // the first SIMD path's result: the others must match it bitwise
    for (const Mixer& m : all_mixers()) {
        auto x = c.bufs[0].slice(x_offset, n);
        std::copy(x0.begin(), x0.end(), x.begin());
        if (into) {
            std::fill(x.begin(), x.end(), std::numeric_limits<float>::quiet_NaN());  // never read
            m.mix_into(x, terms);
        } else {
            m.mix(x, c.weights[0], terms);
        }
        INFO(name(m), " n=", n, " k=", k, " x offset=", x_offset, into ? " mix_into" : " mix");
        CHECK(worst_error(x, x0, c.weights[0], terms, !into) <= 1.0);
        if (m.isa() == SimdIsa::scalar) continue;
        // AVX2 and AVX-512 do the same FMAs in the same order; stores do not change values.
        if (first.empty())
            first.assign(x.begin(), x.end());
        else
            CHECK(std::memcmp(first.data(), x.data(), n * sizeof(float)) == 0);
    }
}

}  // namespace

TEST_CASE("the best path is supported and the free functions use it") {
    CHECK(simd_isa_supported(SimdIsa::scalar));
    CHECK(simd_isa_supported(best_simd_isa()));
    MESSAGE("best path here: ", std::string(to_string(best_simd_isa())));
    SimdIsa parsed{};
    CHECK(parse_simd_isa("avx2", parsed));
    CHECK(parsed == SimdIsa::avx2);
    CHECK_FALSE(parse_simd_isa("sse9", parsed));
    for (SimdIsa isa : {SimdIsa::avx2, SimdIsa::avx512})
        if (!simd_isa_supported(isa)) CHECK_THROWS_AS(Mixer{isa}, Error);

    Case c = make_case(1001, 3, 7);
    std::vector<MixTerm> terms;
    for (int j = 1; j <= 3; ++j) terms.push_back({c.bufs[j].slice(0, 1001), c.weights[j]});
    ParamVector a(1001), b(1001);
    std::copy_n(c.bufs[0].data(), 1001, a.data());
    std::copy_n(c.bufs[0].data(), 1001, b.data());
    mix(a, 0.25f, terms);
    Mixer(best_simd_isa(), StorePolicy::regular).mix(b, 0.25f, terms);
    CHECK(bitwise_equal(a, b));
}

TEST_CASE("mix matches a double reference for 0..12 and 17 terms, odd lengths, every path") {
    for (std::size_t n : {0, 1, 7, 63, 1000}) {
        for (std::size_t k = 0; k <= 12; ++k) check_all_paths(n, k, 0, false);
        check_all_paths(n, 17, 0, false);  // three groups
    }
}

TEST_CASE("mix handles a million-element buffer (many groups' blocks, unaligned)") {
    for (std::size_t k : {0, 1, 2, 5, 8, 9, 12}) check_all_paths(1000003, k, 0, false);
    for (std::size_t k : {3, 11}) check_all_paths(1000003, k, 7, false);
}

TEST_CASE("mix and mix_into handle unaligned heads and tails at every offset") {
    for (std::size_t off = 0; off < kMaxOffset; ++off) {
        for (std::size_t k : {0, 1, 4, 8, 10}) {
            check_all_paths(63, k, off, false);
            check_all_paths(4096 + 37, k, off, false);  // several blocks when k > 8
            check_all_paths(100, k, off, true);
        }
    }
}

TEST_CASE("mix_into never reads its output and gives zeros for no terms") {
    for (std::size_t k : {0, 1, 2, 7, 8, 9, 12}) {
        check_all_paths(1000, k, 0, true);
        check_all_paths(1000003, k, 3, true);
    }
}

TEST_CASE("the helpers: scaled copy, axpy and delta, in place or not, on every path") {
    const std::size_t n = 1037;
    ParamVector x = random_buffer(n, 1), y = random_buffer(n, 2), z = random_buffer(n, 3);
    for (const Mixer& m : all_mixers()) {
        INFO(name(m));
        ParamVector out(n + 1);
        auto o = out.slice(1, n);  // unaligned output
        m.scale_copy(o, -0.5f, x.slice(0, n));
        for (std::size_t i = 0; i < n; ++i) REQUIRE(o[i] == -0.5f * x[i]);  // exact: power of 2
        std::copy_n(y.data(), n, o.data());
        m.axpy(o, 0.3f, x.slice(2, n));
        for (std::size_t i = 0; i < n; ++i)
            REQUIRE(std::abs(o[i] - (double(y[i]) + double(0.3f) * x[i + 2])) <=
                    2 * FLT_EPSILON * (std::abs(y[i]) + std::abs(0.3 * x[i + 2])));
        m.delta(o, x.slice(0, n), y.slice(0, n));
        for (std::size_t i = 0; i < n; ++i) REQUIRE(o[i] == x[i] - y[i]);  // one rounding
        // In place: the output is exactly an input.
        ParamVector d = z;
        m.delta(d.slice(0, n), d.slice(0, n), y.slice(0, n));
        for (std::size_t i = 0; i < n; ++i) REQUIRE(d[i] == z[i] - y[i]);
        d = z;
        m.delta(d.slice(0, n), x.slice(0, n), d.slice(0, n));
        for (std::size_t i = 0; i < n; ++i) REQUIRE(d[i] == x[i] - z[i]);
        d = z;
        m.scale_copy(d.slice(0, n), 2.0f, d.slice(0, n));
        for (std::size_t i = 0; i < n; ++i) REQUIRE(d[i] == 2 * z[i]);
    }
}

TEST_CASE("sizes must match and the output may not alias a term") {
    ParamVector a(100), b(100), c(99);
    const std::vector<MixTerm> wrong = {{b.span(), 0.5f}, {c.span(), 0.5f}};
    CHECK_THROWS_WITH_AS(mix(a, 0.0f, wrong), "mix: term 1 has 99 elements, x has 100", Error);
    CHECK_THROWS_AS(mix_into(a, wrong), Error);
    // Exactly the same buffer, and a partial overlap: both refused for mix and mix_into.
    const std::vector<MixTerm> same = {{b.span(), 0.5f}, {a.span(), 0.5f}};
    CHECK_THROWS_WITH_AS(mix(a, 0.0f, same),
                         doctest::Contains("x overlaps term 1; the output may not alias a term"),
                         Error);
    const std::vector<MixTerm> shifted = {{a.slice(1, 99), 1.0f}};
    CHECK_THROWS_AS(mix(a.slice(0, 99), 0.0f, shifted), Error);
    CHECK_THROWS_AS(mix_into(a.slice(0, 99), shifted), Error);
    // Terms may alias each other: the same buffer twice is its weights summed.
    a.fill(1.0f);
    b.fill(2.0f);
    const std::vector<MixTerm> twice = {{b.span(), 0.25f}, {b.span(), 0.25f}};
    mix(a, 0.5f, twice);
    for (std::size_t i = 0; i < a.size(); ++i) REQUIRE(a[i] == 1.5f);
    // Helpers: in place is fine (above), a partial overlap or another size is not.
    CHECK_THROWS_AS(axpy(a.slice(0, 99), 1.0f, a.slice(1, 99)), Error);
    CHECK_THROWS_AS(scale_copy(a, 1.0f, c), Error);
    CHECK_THROWS_AS(delta(a.slice(1, 99), c, a.slice(0, 99)), Error);
    CHECK_THROWS_WITH_AS(delta(a, b, c), "delta: x_hat has 99 elements, the output has 100", Error);
}

TEST_CASE("mixing with doubly stochastic weights preserves the average on every path") {
    // W = a convex combination of permutation matrices (Birkhoff), so rows and columns sum to 1.
    const std::size_t peers = 7, n = 5003;
    Rng rng(11);
    std::vector<std::vector<double>> w(peers, std::vector<double>(peers, 0.0));
    const double share[] = {0.4, 0.3, 0.2, 0.1};
    for (double s : share) {
        std::vector<std::size_t> perm(peers);
        for (std::size_t i = 0; i < peers; ++i) perm[i] = i;
        for (std::size_t i = peers - 1; i > 0; --i) std::swap(perm[i], perm[rng.below(i + 1)]);
        for (std::size_t i = 0; i < peers; ++i) w[i][perm[i]] += s;
    }
    std::vector<ParamVector> x;
    for (std::size_t p = 0; p < peers; ++p) x.push_back(random_buffer(n, 50 + p));
    for (const Mixer& m : all_mixers()) {
        INFO(name(m));
        std::vector<ParamVector> next;
        double spread_before = 0, spread_after = 0;
        for (std::size_t i = 0; i < peers; ++i) {
            ParamVector xi(n);
            std::copy_n(x[i].data(), n, xi.data());
            std::vector<MixTerm> terms;
            for (std::size_t j = 0; j < peers; ++j)
                if (j != i && w[i][j] > 0) terms.push_back({x[j].slice(0, n), float(w[i][j])});
            m.mix(xi, float(w[i][i]), terms);
            next.push_back(std::move(xi));
        }
        double worst = 0;
        for (std::size_t e = 0; e < n; ++e) {
            double before = 0, after = 0;
            for (std::size_t p = 0; p < peers; ++p) before += x[p][e], after += next[p][e];
            before /= peers, after /= peers;
            worst = std::max(worst, std::abs(after - before));
            for (std::size_t p = 0; p < peers; ++p) {
                spread_before += (x[p][e] - before) * (x[p][e] - before);
                spread_after += (next[p][e] - after) * (next[p][e] - after);
            }
        }
        // Each output is within (k + 2) eps of its exact value (|x| <= 1, weights sum to 1),
        // and the float weights sum to 1 within a few eps: the average moves by ~1e-6 at most.
        CHECK(worst <= 16 * FLT_EPSILON);
        CHECK(spread_after < 0.9 * spread_before);  // and the peers do move together
    }
}

TEST_CASE("automatic stores stream only large outputs that the kernel does not read") {
    const std::size_t big = streaming_threshold_bytes() / sizeof(float), small = 1000;
    for (SimdIsa isa : {SimdIsa::avx2, SimdIsa::avx512}) {
        if (!simd_isa_supported(isa)) continue;
        const Mixer aut(isa), reg(isa, StorePolicy::regular), str(isa, StorePolicy::streaming);
        CHECK(aut.streams(big, false));
        CHECK_FALSE(aut.streams(big - 1, false));
        CHECK_FALSE(aut.streams(big, true));  // mix and axpy: the output is in cache already
        CHECK_FALSE(reg.streams(big, false));
        CHECK(str.streams(small, true));
    }
    CHECK_FALSE(Mixer(SimdIsa::scalar, StorePolicy::streaming).streams(small, false));
    StorePolicy p{};
    CHECK(parse_store_policy("streaming", p));
    CHECK(p == StorePolicy::streaming);
    CHECK(std::string(to_string(StorePolicy::automatic)) == "auto");
    CHECK_FALSE(parse_store_policy("sometimes", p));
}
