#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "gossamer/core/error.hpp"
#include "gossamer/core/json.hpp"
#include "gossamer/core/rng.hpp"
#include "gossamer/optimizers/compress/compressor.hpp"

using namespace gossamer::optim;
namespace json = gossamer::json;

namespace {

std::vector<float> randn(std::size_t n, std::uint64_t seed, double scale = 1.0) {
    gossamer::Rng rng(seed);
    std::vector<float> v(n);
    for (auto& e : v) e = static_cast<float>(scale * rng.normal());
    return v;
}

// Q(x) through the byte encoding, as a receiver sees it.
std::vector<float> roundtrip(const Compressor& c, const std::vector<float>& x, CodecKey key = {}) {
    std::vector<std::byte> bytes(c.encoded_bytes(x.size()));
    c.encode(x, key, bytes);
    std::vector<float> y(x.size(), 7.0f);
    c.decode(bytes, key, y);
    return y;
}

std::unique_ptr<Compressor> make(CompressorKind kind, double fraction = 0.01,
                                 std::size_t block = 256) {
    CompressorConfig c;
    c.kind = kind;
    c.fraction = fraction;
    c.block = block;
    return make_compressor(c);
}

double sq_norm(std::span<const float> v) {
    double s = 0;
    for (float e : v) s += static_cast<double>(e) * e;
    return s;
}

double sq_dist(std::span<const float> a, std::span<const float> b) {
    double s = 0;
    for (std::size_t k = 0; k < a.size(); ++k) s += (double(a[k]) - b[k]) * (double(a[k]) - b[k]);
    return s;
}

}  // namespace

TEST_CASE("fp16 round-trips every half value exactly and rounds others to nearest even") {
    for (std::uint32_t h = 0; h < 0x10000; ++h) {
        const auto bits = static_cast<std::uint16_t>(h);
        const float v = half_to_float(bits);
        if (std::isnan(v)) {
            CHECK(std::isnan(half_to_float(float_to_half(v))));
            continue;
        }
        REQUIRE(float_to_half(v) == bits);
    }
    // Ties go to even: 1 + 2^-11 lies halfway between 1 and 1 + 2^-10.
    CHECK(half_to_float(float_to_half(1.0f + 0x1.0p-11f)) == 1.0f);
    CHECK(half_to_float(float_to_half(1.0f + 3 * 0x1.0p-11f)) == 1.0f + 0x1.0p-9f);
    CHECK(half_to_float(float_to_half(0x1.0p-25f)) == 0.0f);        // tie to even zero
    CHECK(half_to_float(float_to_half(0x1.8p-25f)) == 0x1.0p-24f);  // above the tie
    CHECK(half_to_float(float_to_half(1e6f)) == 65504.0f);          // saturates
    CHECK(half_to_float(float_to_half(-1e6f)) == -65504.0f);
    CHECK(std::isinf(half_to_float(float_to_half(INFINITY))));
}

TEST_CASE("fp16 relative error is at most 2^-11 in the normal half range") {
    auto c = make(CompressorKind::fp16);
    gossamer::Rng rng(3);
    std::vector<float> x(20000);
    for (auto& e : x)
        e = static_cast<float>((rng.uniform() < 0.5 ? -1 : 1) *
                               std::exp2(-14.0 + 29.9 * rng.uniform()));
    const auto y = roundtrip(*c, x);
    for (std::size_t k = 0; k < x.size(); ++k)
        REQUIRE(std::abs(y[k] - x[k]) <= std::abs(x[k]) * 0x1.0p-11f);
    CHECK(c->encoded_bytes(1001) == 2002);
    CHECK(c->encoded_words(1001) == 501);
}

TEST_CASE("int8 error stays below one quantisation step of its block, and is unbiased") {
    for (std::size_t block : {1u, 7u, 256u, 1000u}) {
        CAPTURE(block);
        auto c = make(CompressorKind::int8, 0.01, block);
        auto x = randn(2500, 4, 3.0);
        x[5] = 0;  // a zero and a block of zeros are encoded exactly
        std::fill(x.begin() + 1000, x.begin() + 1000 + static_cast<std::ptrdiff_t>(block), 0.0f);
        const auto y = roundtrip(*c, x, {1, 2, 3});
        for (std::size_t b = 0; b * block < x.size(); ++b) {
            const std::size_t lo = b * block, hi = std::min(x.size(), lo + block);
            float max_abs = 0;
            for (std::size_t k = lo; k < hi; ++k) max_abs = std::max(max_abs, std::abs(x[k]));
            for (std::size_t k = lo; k < hi; ++k)
                REQUIRE(std::abs(y[k] - x[k]) <= max_abs / 127 * (1 + 1e-5f));
        }
        CHECK(y[5] == 0.0f);
        CHECK(c->encoded_bytes(2500) == 2500 + 4 * ((2500 + block - 1) / block));
    }
    // Stochastic rounding: the mean over many keys converges to x.
    auto c = make(CompressorKind::int8);
    const auto x = randn(300, 9);
    std::vector<double> mean(x.size(), 0.0);
    const int draws = 2000;
    for (int s = 0; s < draws; ++s) {
        const auto y = roundtrip(*c, x, {0, 0, static_cast<std::uint64_t>(s)});
        for (std::size_t k = 0; k < x.size(); ++k) mean[k] += y[k] / draws;
    }
    float max_abs = 0;
    for (float e : x) max_abs = std::max(max_abs, std::abs(e));
    for (std::size_t k = 0; k < x.size(); ++k)
        CHECK(std::abs(mean[k] - x[k]) < 5 * (max_abs / 127) / std::sqrt(4.0 * draws));
}

TEST_CASE("int8 encodes a NaN as the code -127, as the device codec does") {
    // Found by fuzzing (tests/fuzz/regressions/codec_int8): the NaN reached a float-to-int8
    // cast, which is undefined (x86 gave 0, the device's fminf/fmaxf give -127).
    auto c = make(CompressorKind::int8, 0.01, 4);
    std::vector<float> x = {1.0f, std::nanf(""), -2.0f, 0.5f, 3.0f};
    std::vector<std::byte> bytes(c->encoded_bytes(x.size()));
    c->encode(x, {1, 2, 3}, bytes);
    std::int8_t code = 0;
    std::memcpy(&code, bytes.data() + 4 * 2 + 1, 1);  // two scales, then the codes
    CHECK(code == -127);
    const auto y = roundtrip(*c, x, {1, 2, 3});
    CHECK(y[1] == doctest::Approx(-2.0f));  // -127 steps of the block's scale, 2 / 127
    CHECK(y[4] == doctest::Approx(3.0f));
}

TEST_CASE("top-k keeps exactly the k largest magnitudes, ties broken by index") {
    auto c = make(CompressorKind::topk, 0.1);
    const auto x = randn(1234, 5);
    const std::size_t k = 124;  // ceil(123.4)
    REQUIRE(c->kept(x.size()) == k);
    const auto y = roundtrip(*c, x);
    std::vector<float> mags;
    for (float e : x) mags.push_back(std::abs(e));
    std::sort(mags.begin(), mags.end(), std::greater<>());
    std::size_t kept = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        if (y[i] != 0) {
            ++kept;
            CHECK(y[i] == x[i]);  // values travel exactly
            CHECK(std::abs(x[i]) >= mags[k - 1]);
        } else {
            CHECK(std::abs(x[i]) <= mags[k - 1]);
        }
    }
    CHECK(kept == k);
    CHECK(c->encoded_bytes(x.size()) == 8 * k);

    // Ties: equal magnitudes go to the lowest indices.
    auto c3 = make(CompressorKind::topk, 0.3);
    const std::vector<float> t = {1, -2, 2, 2, -2, 0, 0, 0, 0, 1};
    const auto yt = roundtrip(*c3, t);
    CHECK(yt == std::vector<float>{0, -2, 2, 2, 0, 0, 0, 0, 0, 0});
    CHECK(make(CompressorKind::topk, 0.07)->kept(100) == 7);  // 0.07 * 100 is not 8
    // NaN counts as the largest magnitude (the order stays strict).
    const auto yn = roundtrip(*make(CompressorKind::topk, 0.2), {1, NAN, 3, INFINITY, 0});
    CHECK(std::isnan(yn[1]));
    CHECK(yn[0] == 0);
    CHECK(yn[2] == 0);
    CHECK(make(CompressorKind::topk, 1e-9)->kept(100) == 1);
}

TEST_CASE("random-k: same indices on both ends, deterministic per key, unscaled contraction") {
    auto c = make(CompressorKind::randomk, 0.1);
    const auto x = randn(500, 6);
    const std::size_t k = 50;
    REQUIRE(c->kept(x.size()) == k);
    CHECK(c->encoded_bytes(x.size()) == 4 * k);  // no indices on the wire

    const CodecKey key{3, 17, 42};
    const auto a = roundtrip(*c, x, key), b = roundtrip(*c, x, key);
    CHECK(a == b);
    std::size_t kept = 0;
    for (std::size_t i = 0; i < x.size(); ++i)
        if (a[i] != 0) {
            ++kept;
            CHECK(a[i] == x[i]);  // unscaled
        }
    CHECK(kept == k);
    // The receiver decodes with the key alone: it puts the values at the sender's indices.
    std::vector<std::byte> bytes(c->encoded_bytes(x.size()));
    c->encode(x, key, bytes);
    std::vector<float> ones(x.size(), 1.0f), at_receiver(x.size(), 0.0f);
    std::vector<std::byte> ones_bytes(bytes.size());
    c->encode(ones, key, ones_bytes);
    c->decode(ones_bytes, key, at_receiver);
    for (std::size_t i = 0; i < x.size(); ++i) CHECK((at_receiver[i] != 0) == (a[i] != 0));
    CHECK(roundtrip(*c, x, {3, 17, 43}) != a);  // another sequence number, other indices

    // E|x - Q(x)|^2 = (1 - k/n)|x|^2; always <= |x|^2.
    double mean = 0;
    const int draws = 4000;
    std::vector<int> hits(x.size(), 0);
    for (int s = 0; s < draws; ++s) {
        const auto y = roundtrip(*c, x, {0, 1, static_cast<std::uint64_t>(s)});
        const double err = sq_dist(x, y);
        REQUIRE(err <= sq_norm(x));
        mean += err / draws;
        for (std::size_t i = 0; i < x.size(); ++i) hits[i] += y[i] != 0;
    }
    const double expected = (1.0 - double(k) / double(x.size())) * sq_norm(x);
    CHECK(mean == doctest::Approx(expected).epsilon(0.01));
    for (int h : hits) CHECK(std::abs(h - draws / 10) < 120);  // each index kept ~10%
}

TEST_CASE("encoded bytes are exact and decode rejects short messages") {
    struct Case {
        CompressorKind kind;
        double fraction;
        std::size_t n, bytes;
    };
    for (const Case& cs :
         {Case{CompressorKind::fp16, 1, 10, 20}, Case{CompressorKind::int8, 1, 10, 14},
          Case{CompressorKind::int8, 1, 257, 265}, Case{CompressorKind::topk, 0.25, 10, 24},
          Case{CompressorKind::randomk, 0.25, 10, 12}, Case{CompressorKind::topk, 1.0, 0, 0}}) {
        auto c = make(cs.kind, cs.fraction);
        CAPTURE(to_string(cs.kind));
        CHECK(c->encoded_bytes(cs.n) == cs.bytes);
        CHECK(c->encoded_words(cs.n) == (cs.bytes + 3) / 4);
        if (cs.n == 0) continue;
        std::vector<std::byte> small(cs.bytes - 1);
        std::vector<float> x(cs.n, 1.0f), y(cs.n);
        CHECK_THROWS_AS(c->encode(x, {}, small), gossamer::Error);
        CHECK_THROWS_AS(c->decode(small, {}, y), gossamer::Error);
        // A word-padded buffer works and its padding is zeroed.
        std::vector<std::byte> padded(c->encoded_words(cs.n) * 4 + 4, std::byte{0xff});
        c->encode(x, {}, padded);
        for (std::size_t b = cs.bytes; b < padded.size(); ++b) CHECK(padded[b] == std::byte{0});
    }
}

TEST_CASE("compressor configs parse, and bad ones name their JSON path") {
    auto parse = [](const std::string& text) {
        json::Document doc = json::parse_text(text, "c.json");
        return parse_compressor_config(json::Node(doc).at("compressor"));
    };
    CHECK(parse(R"({"compressor": {"name": "fp16"}})").kind == CompressorKind::fp16);
    const auto i8 = parse(R"({"compressor": {"name": "int8", "block": 64}})");
    CHECK(i8.kind == CompressorKind::int8);
    CHECK(i8.block == 64);
    CHECK(parse(R"({"compressor": {"name": "int8"}})").block == 256);
    CHECK(parse(R"({"compressor": {"name": "topk", "fraction": 0.1}})").fraction == 0.1);
    CHECK(parse(R"({"compressor": {"name": "randomk", "fraction": 1}})").kind ==
          CompressorKind::randomk);

    auto fails_at = [&](const std::string& text, const std::string& path) {
        CAPTURE(text);
        try {
            parse(text);
            FAIL("no ConfigError");
        } catch (const gossamer::ConfigError& e) {
            CHECK(e.path() == path);
            CHECK(e.file() == "c.json");
        }
    };
    fails_at(R"({"compressor": {"name": "fp8"}})", "compressor.name");
    fails_at(R"({"compressor": {}})", "compressor");
    fails_at(R"({"compressor": "fp16"})", "compressor");
    fails_at(R"({"compressor": {"name": "topk", "fraction": 0}})", "compressor.fraction");
    fails_at(R"({"compressor": {"name": "topk", "fraction": 1.5}})", "compressor.fraction");
    fails_at(R"({"compressor": {"name": "randomk", "fraction": -0.1}})", "compressor.fraction");
    fails_at(R"({"compressor": {"name": "int8", "block": 0}})", "compressor.block");
    fails_at(R"({"compressor": {"name": "int8", "block": 2.5}})", "compressor.block");
    fails_at(R"({"compressor": {"name": "fp16", "fraction": 0.1}})", "compressor.fraction");
    fails_at(R"({"compressor": {"name": "topk", "fractoin": 0.1}})", "compressor.fractoin");
}
