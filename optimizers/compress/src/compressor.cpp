#include "gossamer/optimizers/compress/compressor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>
#include <unordered_set>
#include <vector>

#include "codec_parts.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/core/rng.hpp"

namespace gossamer::optim {

namespace {

using detail::check_in;
using detail::check_out;
using detail::first_non_finite_float;
using detail::rng_seed;

// k = ceil(fraction * n), 1 <= k <= n for n > 0. A product a hair above an integer (0.07 * 100
// is 7.000000000000001 in doubles) counts as that integer.
std::size_t keep_count(double fraction, std::size_t n) {
    if (n == 0) return 0;
    const double k = std::ceil(fraction * static_cast<double>(n) - 1e-9);
    return std::clamp<std::size_t>(static_cast<std::size_t>(std::max(k, 1.0)), 1, n);
}

class Fp16 final : public Compressor {
  public:
    CompressorKind kind() const noexcept override { return CompressorKind::fp16; }
    std::size_t encoded_bytes(std::size_t n) const override { return 2 * n; }
    std::size_t kept(std::size_t n) const override { return n; }
    void encode(std::span<const float> x, const CodecKey&,
                std::span<std::byte> out) const override {
        check_out(out, encoded_bytes(x.size()), "fp16");
        for (std::size_t k = 0; k < x.size(); ++k) {
            const std::uint16_t h = float_to_half(x[k]);
            std::memcpy(out.data() + 2 * k, &h, 2);
        }
    }
    std::optional<std::pair<std::size_t, float>> first_non_finite(std::span<const std::byte> in,
                                                                  std::size_t n) const override {
        if (in.size() < encoded_bytes(n)) return std::nullopt;
        for (std::size_t k = 0; k < n; ++k) {
            std::uint16_t h;
            std::memcpy(&h, in.data() + 2 * k, 2);
            if ((h & 0x7c00u) == 0x7c00u) return std::pair{k, half_to_float(h)};
        }
        return std::nullopt;
    }
    void decode_add(std::span<const std::byte> in, const CodecKey&,
                    std::span<float> y) const override {
        check_in(in, encoded_bytes(y.size()), "fp16");
        for (std::size_t k = 0; k < y.size(); ++k) {
            std::uint16_t h;
            std::memcpy(&h, in.data() + 2 * k, 2);
            y[k] += half_to_float(h);
        }
    }
};

// Layout: ceil(n / block) float scales, then n signed bytes. Value k decodes to q_k * scale.
class Int8 final : public Compressor {
  public:
    Int8(std::size_t block, std::uint64_t seed) : block_(block), seed_(seed) {}
    CompressorKind kind() const noexcept override { return CompressorKind::int8; }
    std::size_t encoded_bytes(std::size_t n) const override { return 4 * blocks(n) + n; }
    std::size_t kept(std::size_t n) const override { return n; }
    void encode(std::span<const float> x, const CodecKey& key,
                std::span<std::byte> out) const override {
        const std::size_t n = x.size(), nb = blocks(n);
        check_out(out, encoded_bytes(n), "int8");
        Rng rng(rng_seed(seed_, key));
        for (std::size_t b = 0; b < nb; ++b) {
            const std::size_t lo = b * block_, hi = std::min(n, lo + block_);
            float max_abs = 0;
            for (std::size_t k = lo; k < hi; ++k) max_abs = std::max(max_abs, std::abs(x[k]));
            const float scale = max_abs / 127.0f;
            std::memcpy(out.data() + 4 * b, &scale, 4);
            for (std::size_t k = lo; k < hi; ++k) {
                // Stochastic rounding: round up with probability equal to the fraction, so
                // E[q * scale] = x and the error stays below one step (scale).
                std::int8_t q = 0;
                if (scale > 0) {
                    const float v = x[k] / scale;
                    const float down = std::floor(v);
                    float r = down + (rng.uniform() < static_cast<double>(v - down) ? 1.0f : 0.0f);
                    // fmin/fmax, not std::clamp: a NaN (a diverged x - x_hat) becomes -127
                    // as on the device (core/cuda/src/compress.cu) instead of reaching the
                    // cast, where it is undefined (found by fuzzing,
                    // docs/operations/reliability.md).
                    r = std::fmin(std::fmax(r, -127.0f), 127.0f);
                    q = static_cast<std::int8_t>(r);
                }
                std::memcpy(out.data() + 4 * nb + k, &q, 1);
            }
        }
    }
    std::optional<std::pair<std::size_t, float>> first_non_finite(std::span<const std::byte> in,
                                                                  std::size_t n) const override {
        if (in.size() < encoded_bytes(n)) return std::nullopt;
        return first_non_finite_float(in, blocks(n), block_);  // the scales
    }
    void decode_add(std::span<const std::byte> in, const CodecKey&,
                    std::span<float> y) const override {
        const std::size_t n = y.size(), nb = blocks(n);
        check_in(in, encoded_bytes(n), "int8");
        for (std::size_t b = 0; b < nb; ++b) {
            float scale;
            std::memcpy(&scale, in.data() + 4 * b, 4);
            const std::size_t lo = b * block_, hi = std::min(n, lo + block_);
            for (std::size_t k = lo; k < hi; ++k) {
                std::int8_t q;
                std::memcpy(&q, in.data() + 4 * nb + k, 1);
                y[k] += static_cast<float>(q) * scale;
            }
        }
    }

  private:
    std::size_t blocks(std::size_t n) const { return (n + block_ - 1) / block_; }
    std::size_t block_;
    std::uint64_t seed_;
};

// Layout: k uint32 indices, ascending, then their k float values.
class TopK final : public Compressor {
  public:
    explicit TopK(double fraction) : fraction_(fraction) {}
    CompressorKind kind() const noexcept override { return CompressorKind::topk; }
    std::size_t encoded_bytes(std::size_t n) const override { return 8 * kept(n); }
    std::size_t kept(std::size_t n) const override { return keep_count(fraction_, n); }
    void encode(std::span<const float> x, const CodecKey&,
                std::span<std::byte> out) const override {
        const std::size_t n = x.size(), k = kept(n);
        if (n > UINT32_MAX) throw Error("topk: vectors of 2^32 values or more are not supported");
        check_out(out, encoded_bytes(n), "topk");
        std::vector<std::uint32_t> idx(n);
        std::iota(idx.begin(), idx.end(), 0u);
        // A strict total order (magnitude down, then index up), so the k kept are unique. NaN
        // counts as the largest magnitude, which keeps the order strict (and the NaN visible).
        auto mag = [&](std::uint32_t a) { return std::isnan(x[a]) ? INFINITY : std::abs(x[a]); };
        auto before = [&](std::uint32_t a, std::uint32_t b) {
            const float fa = mag(a), fb = mag(b);
            return fa > fb || (fa == fb && a < b);
        };
        if (k < n)
            std::nth_element(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(),
                             before);
        idx.resize(k);
        std::sort(idx.begin(), idx.end());
        for (std::size_t i = 0; i < k; ++i) {
            std::memcpy(out.data() + 4 * i, &idx[i], 4);
            std::memcpy(out.data() + 4 * (k + i), &x[idx[i]], 4);
        }
    }
    std::optional<std::pair<std::size_t, float>> first_non_finite(std::span<const std::byte> in,
                                                                  std::size_t n) const override {
        if (in.size() < encoded_bytes(n)) return std::nullopt;
        const std::size_t k = kept(n);
        auto bad = first_non_finite_float(in.subspan(4 * k), k, 1);
        if (bad) {  // the value's own index in the vector
            std::uint32_t j;
            std::memcpy(&j, in.data() + 4 * bad->first, 4);
            bad->first = j;
        }
        return bad;
    }
    void decode_add(std::span<const std::byte> in, const CodecKey&,
                    std::span<float> y) const override {
        const std::size_t n = y.size(), k = kept(n);
        check_in(in, encoded_bytes(n), "topk");
        for (std::size_t i = 0; i < k; ++i) {
            std::uint32_t j;
            float v;
            std::memcpy(&j, in.data() + 4 * i, 4);
            std::memcpy(&v, in.data() + 4 * (k + i), 4);
            if (j >= n) throw Error(fmt::format("topk: index {} of a {}-value vector", j, n));
            y[j] += v;
        }
    }

  private:
    double fraction_;
};

// k distinct indices, uniform over the k-subsets (Floyd's algorithm: k draws, no O(n) pass).
std::vector<std::uint64_t> draw_indices(std::size_t n, std::size_t k, std::uint64_t seed) {
    Rng rng(seed);
    std::unordered_set<std::uint64_t> chosen;
    chosen.reserve(2 * k);
    std::vector<std::uint64_t> idx;
    idx.reserve(k);
    for (std::uint64_t j = n - k; j < n; ++j) {
        const std::uint64_t t = rng.below(j + 1);
        const std::uint64_t pick = chosen.insert(t).second ? t : j;
        if (pick == j) chosen.insert(j);
        idx.push_back(pick);
    }
    std::sort(idx.begin(), idx.end());
    return idx;
}

// Layout: the k values at the indices drawn from the key, in ascending index order.
class RandomK final : public Compressor {
  public:
    RandomK(double fraction, std::uint64_t seed) : fraction_(fraction), seed_(seed) {}
    CompressorKind kind() const noexcept override { return CompressorKind::randomk; }
    std::size_t encoded_bytes(std::size_t n) const override { return 4 * kept(n); }
    std::size_t kept(std::size_t n) const override { return keep_count(fraction_, n); }
    void encode(std::span<const float> x, const CodecKey& key,
                std::span<std::byte> out) const override {
        check_out(out, encoded_bytes(x.size()), "randomk");
        const auto idx = indices(x.size(), key);
        for (std::size_t i = 0; i < idx.size(); ++i) std::memcpy(out.data() + 4 * i, &x[idx[i]], 4);
    }
    std::optional<std::pair<std::size_t, float>> first_non_finite(std::span<const std::byte> in,
                                                                  std::size_t n) const override {
        if (in.size() < encoded_bytes(n)) return std::nullopt;
        return first_non_finite_float(in, kept(n), 1);  // index i of the k kept
    }
    void decode_add(std::span<const std::byte> in, const CodecKey& key,
                    std::span<float> y) const override {
        check_in(in, encoded_bytes(y.size()), "randomk");
        const auto idx = indices(y.size(), key);
        for (std::size_t i = 0; i < idx.size(); ++i) {
            float v;
            std::memcpy(&v, in.data() + 4 * i, 4);
            y[idx[i]] += v;
        }
    }

  private:
    std::vector<std::uint64_t> indices(std::size_t n, const CodecKey& key) const {
        return draw_indices(n, kept(n), rng_seed(seed_, key));
    }

    double fraction_;
    std::uint64_t seed_;
};

}  // namespace

std::string_view to_string(CompressorKind kind) noexcept {
    switch (kind) {
        case CompressorKind::fp16:
            return "fp16";
        case CompressorKind::int8:
            return "int8";
        case CompressorKind::topk:
            return "topk";
        case CompressorKind::randomk:
            return "randomk";
        case CompressorKind::int4:
            return "int4";
    }
    return "?";
}

CompressorConfig parse_compressor_config(const json::Node& node) {
    if (!node.is_object()) node.fail("expected a compressor object", R"(e.g. {"name": "fp16"})");
    CompressorConfig c;
    const std::string name = node.at("name").as_enum({"fp16", "int8", "int4", "topk", "randomk"});
    if (name == "fp16") {
        node.expect_object({"name"});
        c.kind = CompressorKind::fp16;
    } else if (name == "int8") {
        node.expect_object({"name", "block", "seed"});
        c.kind = CompressorKind::int8;
        if (auto b = node.find("block")) c.block = static_cast<std::size_t>(b->as_int(1));
    } else if (name == "int4") {
        node.expect_object({"name", "block", "seed"});
        c.kind = CompressorKind::int4;
        c.block = kInt4DefaultBlock;
        if (auto b = node.find("block")) {
            c.block = static_cast<std::size_t>(b->as_int(1));
            if (c.block > kInt4MaxBlock)
                b->fail(fmt::format("int4 block {} is above {}: its error bound block / 196 "
                                    "would not make it a contraction",
                                    c.block, kInt4MaxBlock),
                        fmt::format("use a block of at most {} (default {})", kInt4MaxBlock,
                                    kInt4DefaultBlock));
        }
    } else {
        c.kind = name == "topk" ? CompressorKind::topk : CompressorKind::randomk;
        if (c.kind == CompressorKind::topk)
            node.expect_object({"name", "fraction"});
        else
            node.expect_object({"name", "fraction", "seed"});
        if (auto f = node.find("fraction")) {
            c.fraction = f->as_double();
            if (!(c.fraction > 0 && c.fraction <= 1))
                f->fail(fmt::format("fraction {} is outside (0, 1]", c.fraction), "use e.g. 0.01");
        }
    }
    if (auto s = node.find("seed")) c.seed = static_cast<std::uint64_t>(s->as_int(0));
    return c;
}

void Compressor::decode(std::span<const std::byte> in, const CodecKey& key,
                        std::span<float> y) const {
    std::fill(y.begin(), y.end(), 0.0f);
    decode_add(in, key, y);
}

namespace {
std::unique_ptr<Compressor> build_compressor(const CompressorConfig& c) {
    switch (c.kind) {
        case CompressorKind::fp16:
            return std::make_unique<Fp16>();
        case CompressorKind::int8:
            if (c.block < 1) throw Error("int8: block must be >= 1");
            return std::make_unique<Int8>(c.block, c.seed);
        case CompressorKind::int4:
            return detail::make_int4(c.block, c.seed);
        case CompressorKind::topk:
        case CompressorKind::randomk:
            if (!(c.fraction > 0 && c.fraction <= 1))
                throw Error(fmt::format("{}: fraction {} is outside (0, 1]", to_string(c.kind),
                                        c.fraction));
            if (c.kind == CompressorKind::topk) return std::make_unique<TopK>(c.fraction);
            return std::make_unique<RandomK>(c.fraction, c.seed);
    }
    throw Error("unknown compressor");
}
}  // namespace

std::unique_ptr<Compressor> make_compressor(const CompressorConfig& c) {
    auto q = build_compressor(c);
    q->config_ = c;
    return q;
}

void check_device_codec(const CompressorConfig& config, const std::string& path) {
    if (config.kind == CompressorKind::int4)
        throw ConfigError("", path, "int4 has no device codec: the model's vectors are on a device",
                          "use int8 for a model on a device, or keep the model on the host");
}

std::uint64_t codec_seed(const CompressorConfig& config, const CodecKey& key) noexcept {
    return rng_seed(config.seed, key);
}

std::vector<std::uint64_t> randomk_indices(const CompressorConfig& config, std::size_t n,
                                           const CodecKey& key) {
    return draw_indices(n, keep_count(config.fraction, n), codec_seed(config, key));
}

std::uint16_t float_to_half(float x) noexcept {
    std::uint32_t f = std::bit_cast<std::uint32_t>(x);
    const auto sign = static_cast<std::uint16_t>((f >> 16) & 0x8000u);
    f &= 0x7fffffffu;
    if (f >= 0x7f800000u) return sign | (f > 0x7f800000u ? 0x7e00u : 0x7c00u);  // NaN, inf
    if (f >= 0x477ff000u) return sign | 0x7bffu;  // 65520 and up would round to inf: saturate
    if (f < 0x38800000u) {
        // Half subnormal or zero: adding 0.5f puts the value's 2^-24 units in the low mantissa
        // bits, and the float addition rounds to nearest even there.
        const float magic = std::bit_cast<float>(0x3f000000u);
        const float sum = std::bit_cast<float>(f) + magic;
        return sign | static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(sum) - 0x3f000000u);
    }
    // Normal: rebias the exponent, add half an ulp minus one plus the lowest kept bit (ties go
    // to even), truncate 13 mantissa bits.
    const std::uint32_t odd = (f >> 13) & 1u;
    f += 0xc8000fffu + odd;
    return sign | static_cast<std::uint16_t>(f >> 13);
}

float half_to_float(std::uint16_t h) noexcept {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    const std::uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0) {
        const float v = static_cast<float>(mant) * 0x1.0p-24f;  // exact
        return sign ? -v : v;
    }
    if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
    return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

}  // namespace gossamer::optim
