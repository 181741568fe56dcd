#pragma once
/// Per-edge compression (docs/algorithms/compression.md, "Per-edge compression"): each delta a
/// sender encodes on an edge uses a compressor chosen from that edge's measured throughput
/// (EdgeSpeeds): raw floats on fast edges, stronger compressors on slower ones. The choice
/// travels in the message header (Message::codec), so the receiver decodes exactly what was
/// encoded, and both ends of the edge add the same floats to their replicas.
///
/// Codec ids on the wire:
///   0      the channel's own compressor (what every delta used before per-edge compression,
///          and still uses while the edge is not measured)
///   1      raw float32 deltas (Q = identity)
///   2 + i  tier i, tiers sorted by descending `below`

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "gossamer/core/json.hpp"
#include "gossamer/optimizers/compress/compressor.hpp"
#include "gossamer/optimizers/protocol/device.hpp"

namespace gossamer::proto {

inline constexpr std::uint8_t kCodecChannel = 0;
inline constexpr std::uint8_t kCodecRaw = 1;
/// The most tiers a job may name (codec ids stay below 256 with room to spare).
inline constexpr std::size_t kMaxCodecTiers = 16;

/// Edges measured below `below` bytes/s use `compressor` (the tier with the smallest such bound
/// wins); edges at or above every bound send raw floats.
struct EdgeCodecTier {
    double below = 0;
    optim::CompressorConfig compressor;
};

/// Reads [{"below": 1.25e8, "compressor": {"name": "int8"}}, ...] (1 to 16 tiers, distinct
/// bounds > 0, in any order). Throws ConfigError naming the JSON path.
std::vector<EdgeCodecTier> parse_edge_codec_tiers(const json::Node& node);

class EdgeCodecs {
  public:
    EdgeCodecs() = default;
    /// Builds the tiers' compressors; sorts them by descending bound.
    explicit EdgeCodecs(std::vector<EdgeCodecTier> tiers);

    /// False without tiers: every delta uses its channel's compressor (codec 0).
    bool on() const noexcept { return !tiers_.empty(); }
    /// The codec of a delta on an edge measured at `throughput` bytes/s (0: not measured):
    /// kCodecChannel when unmeasured, kCodecRaw at or above every bound, else 2 + the index of
    /// the tier with the smallest bound above the throughput.
    std::uint8_t choose(double throughput) const noexcept;
    /// The compressor of `codec`: `channel` for kCodecChannel, nullptr for raw floats, the
    /// tier's otherwise. Throws Error for a codec it does not know.
    const optim::Compressor* compressor(std::uint8_t codec, const optim::Compressor* channel) const;
    /// Words a delta of n values takes with that compressor (nullptr: n).
    static std::size_t words(const optim::Compressor* q, std::size_t n) {
        return q ? q->encoded_words(n) : n;
    }
    const std::vector<EdgeCodecTier>& tiers() const noexcept { return tiers_; }

  private:
    std::vector<EdgeCodecTier> tiers_;
    std::vector<std::unique_ptr<optim::Compressor>> q_;
};

/// payload <- the encoding of `delta` with q (raw floats when q is null; payload holds
/// EdgeCodecs::words(q, n) words), then x_hat += what the receiver will decode from it. With a
/// device, delta and x_hat are device memory.
void encode_delta(const optim::Compressor* q, std::span<const float> delta,
                  const optim::CodecKey& key, std::span<float> payload, std::span<float> x_hat,
                  Device* device = nullptr);
/// x_hat += the decoded `payload` (encode_delta's output for the same q and key).
void decode_delta(const optim::Compressor* q, std::span<const float> payload,
                  const optim::CodecKey& key, std::span<float> x_hat, Device* device = nullptr);

}  // namespace gossamer::proto
