// The 4-bit codec (compressor.hpp, docs/algorithms/compression.md): int8's scheme with 15
// levels. Layout: ceil(n / block) float scales max|x| / 7, then ceil(n / 2) bytes of 4-bit
// two's-complement codes in [-7, 7], value 2i in the low nibble of byte i and value 2i + 1 in its
// high nibble (a last odd value leaves the high nibble 0). Value k decodes to q_k * scale.
//
// Contraction: stochastic rounding has variance at most scale^2 / 4 a value, and a block's
// |x|^2 >= max^2 = 49 scale^2, so E|x - Q(x)|^2 <= block / 196 |x|^2: a contraction for blocks
// up to 195 (kInt4MaxBlock), delta >= 1 - 64 / 196 = 0.67 at the default block of 64.
#include <cmath>
#include <cstring>

#include "codec_parts.hpp"

namespace gossamer::optim::detail {

namespace {

constexpr float kLevels = 7.0f;

class Int4 final : public Compressor {
  public:
    Int4(std::size_t block, std::uint64_t seed) : block_(block), seed_(seed) {}
    CompressorKind kind() const noexcept override { return CompressorKind::int4; }
    std::size_t encoded_bytes(std::size_t n) const override { return 4 * blocks(n) + (n + 1) / 2; }
    std::size_t kept(std::size_t n) const override { return n; }

    void encode(std::span<const float> x, const CodecKey& key,
                std::span<std::byte> out) const override {
        const std::size_t n = x.size(), nb = blocks(n);
        check_out(out, encoded_bytes(n), "int4");
        std::byte* codes = out.data() + 4 * nb;
        std::fill(codes, codes + (n + 1) / 2, std::byte{0});
        Rng rng(rng_seed(seed_, key));
        for (std::size_t b = 0; b < nb; ++b) {
            const std::size_t lo = b * block_, hi = std::min(n, lo + block_);
            float max_abs = 0;
            for (std::size_t k = lo; k < hi; ++k) max_abs = std::max(max_abs, std::abs(x[k]));
            const float scale = max_abs / kLevels;
            std::memcpy(out.data() + 4 * b, &scale, 4);
            if (!(scale > 0)) continue;  // a block of zeros (codes 0), or a NaN scale
            for (std::size_t k = lo; k < hi; ++k) {
                // Up with probability equal to the fraction: E[q * scale] = x, error < scale.
                const float v = x[k] / scale;
                const float down = std::floor(v);
                float r = down + (rng.uniform() < static_cast<double>(v - down) ? 1.0f : 0.0f);
                // fmin/fmax, not std::clamp: a NaN becomes -7 (as int8's -127), never a cast of
                // NaN to an integer, which is undefined.
                r = std::fmin(std::fmax(r, -kLevels), kLevels);
                const auto nibble = static_cast<unsigned>(static_cast<int>(r)) & 0xfu;
                codes[k / 2] |= static_cast<std::byte>(k % 2 == 0 ? nibble : nibble << 4);
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
        check_in(in, encoded_bytes(n), "int4");
        const std::byte* codes = in.data() + 4 * nb;
        for (std::size_t b = 0; b < nb; ++b) {
            float scale;
            std::memcpy(&scale, in.data() + 4 * b, 4);
            const std::size_t lo = b * block_, hi = std::min(n, lo + block_);
            for (std::size_t k = lo; k < hi; ++k) {
                const auto byte = std::to_integer<unsigned>(codes[k / 2]);
                const unsigned nibble = k % 2 == 0 ? byte & 0xfu : byte >> 4;
                // Sign-extend the 4-bit code: 8..15 are -8..-1 (an encoder writes -7..7 only).
                const int q = static_cast<int>(nibble) - (nibble >= 8 ? 16 : 0);
                y[k] += static_cast<float>(q) * scale;
            }
        }
    }

  private:
    std::size_t blocks(std::size_t n) const { return (n + block_ - 1) / block_; }
    std::size_t block_;
    std::uint64_t seed_;
};

}  // namespace

std::unique_ptr<Compressor> make_int4(std::size_t block, std::uint64_t seed) {
    if (block < 1 || block > kInt4MaxBlock)
        throw Error(fmt::format("int4: block {} is outside [1, {}]", block, kInt4MaxBlock));
    return std::make_unique<Int4>(block, seed);
}

}  // namespace gossamer::optim::detail
