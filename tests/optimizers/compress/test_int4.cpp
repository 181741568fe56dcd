// The 4-bit codec (optimizers/compress/src/int4.cpp): its wire format, its error bound, its
// unbiased rounding, the contraction bound block / 196 the header promises, and its options.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gossamer/core/error.hpp"
#include "gossamer/core/json.hpp"
#include "gossamer/core/rng.hpp"
#include "gossamer/optimizers/compress/compressor.hpp"

using namespace gossamer::optim;
namespace json = gossamer::json;

namespace {

std::unique_ptr<Compressor> int4(std::size_t block = kInt4DefaultBlock, std::uint64_t seed = 0) {
    CompressorConfig c;
    c.kind = CompressorKind::int4;
    c.block = block;
    c.seed = seed;
    return make_compressor(c);
}

std::vector<float> randn(std::size_t n, std::uint64_t seed, double scale = 1.0) {
    gossamer::Rng rng(seed);
    std::vector<float> v(n);
    for (auto& e : v) e = static_cast<float>(scale * rng.normal());
    return v;
}

std::vector<std::byte> encode(const Compressor& c, const std::vector<float>& x, CodecKey key) {
    std::vector<std::byte> bytes(c.encoded_bytes(x.size()));
    c.encode(x, key, bytes);
    return bytes;
}

std::vector<float> roundtrip(const Compressor& c, const std::vector<float>& x, CodecKey key) {
    std::vector<float> y(x.size(), 7.0f);
    c.decode(encode(c, x, key), key, y);
    return y;
}

double sq_norm(const std::vector<float>& v) {
    double s = 0;
    for (float e : v) s += double(e) * e;
    return s;
}

// The mean of |x - Q(x)|^2 over `draws` keys.
double mean_sq_error(const Compressor& c, const std::vector<float>& x, int draws) {
    double sum = 0;
    for (int s = 0; s < draws; ++s) {
        const auto y = roundtrip(c, x, {0, 1, static_cast<std::uint64_t>(s)});
        for (std::size_t k = 0; k < x.size(); ++k) sum += (double(x[k]) - y[k]) * (x[k] - y[k]);
    }
    return sum / draws;
}

}  // namespace

TEST_CASE("int4 wire format: scales, then two codes a byte, low nibble first") {
    auto c = int4(4);
    // Block 0: max 1.4, scale 0.2; values on its grid (up to float rounding, so the key's draws
    // round them to the nearest level). Block 1: a single -0.6, scale 0.6 / 7, code -7.
    const std::vector<float> x = {1.4f, -0.2f, 0.0f, 0.6f, -0.6f};
    CHECK(c->encoded_bytes(5) == 2 * 4 + 3);
    const auto bytes = encode(*c, x, {1, 2, 3});
    float s0, s1;
    std::memcpy(&s0, bytes.data(), 4);
    std::memcpy(&s1, bytes.data() + 4, 4);
    CHECK(s0 == 1.4f / 7.0f);
    CHECK(s1 == 0.6f / 7.0f);
    // Codes 7, -1 (0xf), 0, 3, then -7 (0x9) and a zero high nibble.
    CHECK(std::to_integer<unsigned>(bytes[8]) == 0xf7u);
    CHECK(std::to_integer<unsigned>(bytes[9]) == 0x30u);
    CHECK(std::to_integer<unsigned>(bytes[10]) == 0x09u);
    const auto y = roundtrip(*c, x, {1, 2, 3});
    CHECK(y[0] == doctest::Approx(1.4f));
    CHECK(y[1] == doctest::Approx(-0.2f));
    CHECK(y[2] == 0.0f);
    CHECK(y[4] == doctest::Approx(-0.6f));
}

TEST_CASE("int4 errs by less than one step of its block, exactly sized, deterministic per key") {
    for (std::size_t block : {1u, 7u, 64u, 195u}) {
        CAPTURE(block);
        auto c = int4(block, 11);
        auto x = randn(2501, 4, 3.0);  // odd: the last byte holds one code
        x[5] = 0;
        std::fill(x.begin() + 1000, x.begin() + 1000 + static_cast<std::ptrdiff_t>(block), 0.0f);
        const auto y = roundtrip(*c, x, {1, 2, 3});
        for (std::size_t lo = 0; lo < x.size(); lo += block) {
            const std::size_t hi = std::min(x.size(), lo + block);
            float max_abs = 0;
            for (std::size_t k = lo; k < hi; ++k) max_abs = std::max(max_abs, std::abs(x[k]));
            for (std::size_t k = lo; k < hi; ++k)
                REQUIRE(std::abs(y[k] - x[k]) <= max_abs / 7 * (1 + 1e-5f));
        }
        CHECK(y[5] == 0.0f);
        CHECK(y[1000] == 0.0f);
        const std::size_t nb = (2501 + block - 1) / block;
        CHECK(c->encoded_bytes(2501) == 4 * nb + 1251);
        CHECK(c->kept(2501) == 2501);
        CHECK(encode(*c, x, {1, 2, 3}) == encode(*c, x, {1, 2, 3}));
        if (block == 1) continue;  // every value is its block's maximum: exact, no draw
        CHECK(encode(*c, x, {1, 2, 4}) != encode(*c, x, {1, 2, 3}));
        CHECK(encode(*int4(block, 12), x, {1, 2, 3}) != encode(*c, x, {1, 2, 3}));
    }
    // fp32 takes 4 bytes a value; int4 with blocks of 64 takes 0.5 + 4 / 64: 7.1x fewer.
    CHECK(int4()->encoded_bytes(64000) == 32000 + 4000);
}

TEST_CASE("int4 stochastic rounding is unbiased") {
    auto c = int4();
    const auto x = randn(300, 9);
    std::vector<double> mean(x.size(), 0.0);
    const int draws = 2000;
    for (int s = 0; s < draws; ++s) {
        const auto y = roundtrip(*c, x, {0, 0, static_cast<std::uint64_t>(s)});
        for (std::size_t k = 0; k < x.size(); ++k) mean[k] += y[k] / draws;
    }
    for (std::size_t b = 0; b < x.size(); b += 64) {
        float max_abs = 0;
        for (std::size_t k = b; k < std::min(x.size(), b + 64); ++k)
            max_abs = std::max(max_abs, std::abs(x[k]));
        for (std::size_t k = b; k < std::min(x.size(), b + 64); ++k)
            CHECK(std::abs(mean[k] - x[k]) < 5 * (max_abs / 7) / std::sqrt(4.0 * draws));
    }
}

TEST_CASE("int4 is a contraction: E|x - Q(x)|^2 <= block / 196 |x|^2 up to the block limit") {
    // The worst vector for the bound: one value at the block's maximum (7 steps, exact) and
    // the others halfway between two levels (error scale / 2 whichever way they round): the ratio
    // is (B - 1) / (B + 195), below the proven B / 196.
    for (std::size_t block : {2u, 64u, 195u}) {
        CAPTURE(block);
        auto c = int4(block);
        std::vector<float> x(block, 0.5f);
        x[0] = 7.0f;
        const double ratio = mean_sq_error(*c, x, 4000) / sq_norm(x);
        const double worst = double(block - 1) / double(block + 195);
        MESSAGE("block " << block << ": E|x - Q(x)|^2 / |x|^2 = " << ratio << " (half-step case "
                         << worst << ", bound " << double(block) / 196 << ")");
        CHECK(ratio == doctest::Approx(worst).epsilon(0.05));
        CHECK(ratio <= double(block) / 196);
        CHECK(ratio < 1.0);
    }
    // Gaussian vectors sit well inside the bound.
    const auto x = randn(6400, 3);
    const double ratio = mean_sq_error(*int4(), x, 200) / sq_norm(x);
    MESSAGE("Gaussian, block 64: " << ratio);
    CHECK(ratio < 64.0 / 196);
    // Past the limit the bound is above 1 and int4 refuses the block.
    CHECK_THROWS_AS(int4(kInt4MaxBlock + 1), gossamer::Error);
    CHECK_THROWS_AS(int4(0), gossamer::Error);
}

TEST_CASE("int4 encodes a NaN as the code -7 and reports a non-finite scale") {
    auto c = int4(4);
    const std::vector<float> x = {1.0f, std::nanf(""), -2.0f, 0.5f, INFINITY};
    const auto bytes = encode(*c, x, {1, 2, 3});
    CHECK((std::to_integer<unsigned>(bytes[8]) >> 4) == 0x9u);  // value 1: high nibble, -7
    std::vector<float> y(x.size(), 0.0f);
    c->decode(bytes, {1, 2, 3}, y);
    CHECK(y[1] == doctest::Approx(-2.0f));
    // Block 1 holds the infinity: its scale is infinite, found at the block's first index.
    const auto bad = c->first_non_finite(bytes, x.size());
    REQUIRE(bad.has_value());
    CHECK(bad->first == 4);
    CHECK(std::isinf(bad->second));
    CHECK_FALSE(c->first_non_finite(std::span(bytes).first(10), x.size()).has_value());
}

TEST_CASE("int4 refuses short buffers and zeroes the padding of a word-padded one") {
    auto c = int4(8);
    std::vector<float> x(13, 1.0f), y(13);
    const std::size_t need = 2 * 4 + 7;
    REQUIRE(c->encoded_bytes(13) == need);
    std::vector<std::byte> small(need - 1);
    CHECK_THROWS_AS(c->encode(x, {}, small), gossamer::Error);
    CHECK_THROWS_AS(c->decode(small, {}, y), gossamer::Error);
    std::vector<std::byte> padded(c->encoded_words(13) * 4 + 4, std::byte{0xff});
    c->encode(x, {}, padded);
    for (std::size_t b = need; b < padded.size(); ++b) CHECK(padded[b] == std::byte{0});
    CHECK((std::to_integer<unsigned>(padded[need - 1]) >> 4) == 0u);  // the 14th nibble
}

TEST_CASE("int4 options: block 64 by default, at most 195, bad ones name their JSON path") {
    auto parse = [](const std::string& text) {
        json::Document doc = json::parse_text(text, "c.json");
        return parse_compressor_config(json::Node(doc).at("compressor"));
    };
    const auto d = parse(R"({"compressor": {"name": "int4"}})");
    CHECK(d.kind == CompressorKind::int4);
    CHECK(d.block == 64);
    CHECK(to_string(d.kind) == "int4");
    const auto b = parse(R"({"compressor": {"name": "int4", "block": 195, "seed": 4}})");
    CHECK(b.block == 195);
    CHECK(b.seed == 4);
    CHECK(make_compressor(b)->kind() == CompressorKind::int4);
    auto fails_at = [&](const std::string& text, const std::string& path, const char* what) {
        CAPTURE(text);
        try {
            parse(text);
            FAIL("no ConfigError");
        } catch (const gossamer::ConfigError& e) {
            CHECK(e.path() == path);
            CHECK(e.file() == "c.json");
            CHECK(std::string(e.what()).find(what) != std::string::npos);
        }
    };
    fails_at(R"({"compressor": {"name": "int4", "block": 0}})", "compressor.block", "");
    fails_at(R"({"compressor": {"name": "int4", "block": 196}})", "compressor.block",
             "int4 block 196 is above 195");
    fails_at(R"({"compressor": {"name": "int4", "block": 1.5}})", "compressor.block", "");
    fails_at(R"({"compressor": {"name": "int4", "fraction": 0.1}})", "compressor.fraction", "");
}

TEST_CASE("int4 has no device codec: check_device_codec refuses it by path, the others pass") {
    CompressorConfig c;
    for (auto kind : {CompressorKind::fp16, CompressorKind::int8, CompressorKind::topk,
                      CompressorKind::randomk}) {
        c.kind = kind;
        CHECK_NOTHROW(check_device_codec(c, "choco.compressor"));
    }
    c.kind = CompressorKind::int4;
    try {
        check_device_codec(c, "choco.compressor");
        FAIL("no ConfigError");
    } catch (const gossamer::ConfigError& e) {
        CHECK(e.path() == "choco.compressor");
        CHECK(std::string(e.what()).find("int4 has no device codec") != std::string::npos);
    }
}
