#pragma once
/// Compression operators Q for gossip deltas (DESIGN.md, "choco"; docs/algorithms/compression.md).
///
/// A Compressor encodes a float vector into bytes and decodes those bytes back to Q(x). Every
/// compressor here is a contraction, E|x - Q(x)|^2 <= (1 - delta)|x|^2 with delta > 0 (int8: for
/// blocks up to 4 * 127^2 elements; int4: 1 - delta <= block / 196, so its blocks are limited to
/// kInt4MaxBlock = 195), which is what CHOCO-SGD needs; random-k is therefore UNSCALED (it keeps
/// k values as they are, it does not multiply them by n / k).
///
/// Encoding is deterministic for a CodecKey: random-k draws its indices from it (so indices never
/// travel: the receiver draws the same ones) and int8 and int4 their stochastic-rounding bits.
/// Decoding the same bytes with the same key gives bit-identical floats on any peer, so a sender
/// that adds its own decoded message to a replica keeps that replica bit-identical to the
/// receiver's.
///
/// Wire sizes are exact and known in advance from the vector length (encoded_bytes()); a
/// message carries them in whole 4-byte words (encoded_words()).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gossamer/core/json.hpp"

namespace gossamer::optim {

/// Where the randomness of one encoded message comes from. Both ends of an edge build the same
/// key: the job's compression seed, a stream that names the edge (or the sender, when one
/// message goes to all its neighbours) and the message's sequence number on it.
struct CodecKey {
    std::uint64_t seed = 0;
    std::uint64_t stream = 0;
    std::uint64_t index = 0;
};

/// The compressors by name. The values are on the wire (qallreduce's Message::codec is 1 + kind):
/// a new one goes at the end.
enum class CompressorKind { fp16, int8, topk, randomk, int4 };

/// int4's values per scale when the config names none, and the most it accepts: its contraction
/// bound 1 - delta <= block / 196 (docs/algorithms/compression.md, "Contraction") must stay < 1.
inline constexpr std::size_t kInt4DefaultBlock = 64;
inline constexpr std::size_t kInt4MaxBlock = 195;

std::string_view to_string(CompressorKind kind) noexcept;

/// A compressor and its parameters.
struct CompressorConfig {
    CompressorKind kind = CompressorKind::fp16;
    std::size_t block = 256;  ///< int8, int4: values per scale, >= 1 (int4: <= kInt4MaxBlock)
    double fraction = 0.01;   ///< topk, randomk: share of values kept, in (0, 1]
    std::uint64_t seed = 0;   ///< randomk, int8, int4: mixed into every CodecKey's seed
};

/// Reads {"name": "fp16"} | {"name": "int8", "block": 256} | {"name": "int4", "block": 64} |
/// {"name": "topk", "fraction": f} | {"name": "randomk", "fraction": f, "seed": s}. Throws
/// ConfigError naming the JSON path for an unknown name or key, a wrong type, a fraction outside
/// (0, 1], a block below 1, or an int4 block above kInt4MaxBlock.
CompressorConfig parse_compressor_config(const json::Node& node);

class Compressor {
  public:
    virtual ~Compressor() = default;

    virtual CompressorKind kind() const noexcept = 0;
    /// The configuration make_compressor() built it from (other implementations of the same
    /// codec, such as the device codec, need its block, fraction and seed).
    const CompressorConfig& config() const noexcept { return config_; }
    /// Exact encoded size of a vector of n floats, in bytes (no framing: n is known to both ends).
    virtual std::size_t encoded_bytes(std::size_t n) const = 0;
    /// Whole 4-byte words that hold encoded_bytes(n): what a Message carries as `elements`.
    std::size_t encoded_words(std::size_t n) const { return (encoded_bytes(n) + 3) / 4; }
    /// Values Q keeps of a vector of n floats (n for fp16, int8 and int4, k for topk and randomk).
    virtual std::size_t kept(std::size_t n) const = 0;

    /// Encodes x into out[0, encoded_bytes(x.size())); bytes past that are zeroed. Throws Error
    /// when out is too small (or, for topk, when x has 2^32 values or more).
    virtual void encode(std::span<const float> x, const CodecKey& key,
                        std::span<std::byte> out) const = 0;
    /// y += Q(x) from the bytes `in` (encoded from y.size() values with the same key). Throws
    /// Error when `in` holds fewer than encoded_bytes(y.size()) bytes or a bad index.
    virtual void decode_add(std::span<const std::byte> in, const CodecKey& key,
                            std::span<float> y) const = 0;
    /// y = Q(x): zeroes y, then decode_add().
    void decode(std::span<const std::byte> in, const CodecKey& key, std::span<float> y) const;
    /// The first value the bytes `in` (encoded from n values) carry that is NaN or infinite, as
    /// (its index in the encoded order, its value), or nullopt when every carried value (int8,
    /// int4: every scale) is finite or `in` is too short (decode_add refuses that). Read-only, so a
    /// receiver can refuse a message before it decodes anything (docs/operations/reliability.md).
    virtual std::optional<std::pair<std::size_t, float>> first_non_finite(
        std::span<const std::byte> in, std::size_t n) const = 0;

  private:
    friend std::unique_ptr<Compressor> make_compressor(const CompressorConfig& config);
    CompressorConfig config_;
};

/// Builds the compressor `config` describes.
std::unique_ptr<Compressor> make_compressor(const CompressorConfig& config);

/// For vectors on a device: throws ConfigError at the JSON path `path` (file left empty for the
/// caller to name) when `config`'s codec has no device implementation (int4: docs/operations/
/// gpu.md), so that a job refuses it before it starts.
void check_device_codec(const CompressorConfig& config, const std::string& path);

/// The seed a message's random draws come from (int8 and int4 rounding, random-k indices): the
/// config's seed mixed with the key. For other implementations of the codecs (the device codec).
std::uint64_t codec_seed(const CompressorConfig& config, const CodecKey& key) noexcept;
/// The ascending indices random-k keeps of an n-value vector for `key`: exactly those its
/// encode() and decode_add() use.
std::vector<std::uint64_t> randomk_indices(const CompressorConfig& config, std::size_t n,
                                           const CodecKey& key);

/// IEEE half precision bits of x, rounded to nearest even. NaN stays NaN and infinities stay
/// infinite; finite values past the half range saturate to +-65504 (not infinity), so that a
/// replica built from deltas never becomes infinite.
std::uint16_t float_to_half(float x) noexcept;
/// The float value of IEEE half bits h (exact).
float half_to_float(std::uint16_t h) noexcept;

}  // namespace gossamer::optim
