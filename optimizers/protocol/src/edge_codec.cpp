#include "gossamer/optimizers/protocol/edge_codec.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <string>

#include "gossamer/core/error.hpp"

namespace gossamer::proto {

std::vector<EdgeCodecTier> parse_edge_codec_tiers(const json::Node& node) {
    node.expect_array(1);
    if (node.size() > kMaxCodecTiers)
        node.fail(fmt::format("{} tiers, at most {}", node.size(), kMaxCodecTiers), "merge tiers");
    std::vector<EdgeCodecTier> tiers;
    for (const json::Node& t : node.elements()) {
        t.expect_object({"below", "compressor"});
        EdgeCodecTier tier;
        const json::Node below = t.at("below");
        tier.below = below.as_double();
        if (!(tier.below > 0))
            below.fail(fmt::format("below {} must be > 0 bytes/s", tier.below),
                       "use e.g. 1.25e7 (100 Mbit/s)");
        for (const auto& other : tiers)
            if (other.below == tier.below)
                below.fail(fmt::format("two tiers below {} bytes/s", tier.below),
                           "give each tier its own bound");
        tier.compressor = optim::parse_compressor_config(t.at("compressor"));
        tiers.push_back(tier);
    }
    return tiers;
}

EdgeCodecs::EdgeCodecs(std::vector<EdgeCodecTier> tiers) : tiers_(std::move(tiers)) {
    if (tiers_.size() > kMaxCodecTiers) throw Error("per-edge compression: too many tiers");
    std::sort(tiers_.begin(), tiers_.end(),
              [](const EdgeCodecTier& a, const EdgeCodecTier& b) { return a.below > b.below; });
    for (const auto& t : tiers_) q_.push_back(optim::make_compressor(t.compressor));
}

std::uint8_t EdgeCodecs::choose(double throughput) const noexcept {
    if (!(throughput > 0) || tiers_.empty()) return kCodecChannel;
    // Descending bounds: the last tier whose bound lies above the throughput is the tightest.
    std::uint8_t codec = kCodecRaw;
    for (std::size_t i = 0; i < tiers_.size(); ++i)
        if (throughput < tiers_[i].below) codec = static_cast<std::uint8_t>(2 + i);
    return codec;
}

const optim::Compressor* EdgeCodecs::compressor(std::uint8_t codec,
                                                const optim::Compressor* channel) const {
    if (codec == kCodecChannel) return channel;
    if (!tiers_.empty()) {
        if (codec == kCodecRaw) return nullptr;
        if (codec >= 2 && static_cast<std::size_t>(codec - 2) < tiers_.size())
            return q_[static_cast<std::size_t>(codec - 2)].get();
    }
    throw Error(fmt::format(
        "a delta with codec {}, which this job does not use ({} tiers of per-edge compression)",
        codec, tiers_.size()));
}

void encode_delta(const optim::Compressor* q, std::span<const float> delta,
                  const optim::CodecKey& key, std::span<float> payload, std::span<float> x_hat,
                  Device* device) {
    const std::size_t n = x_hat.size();
    if (!q) {  // raw floats: x_hat moves by the very delta that travels
        if (device) {
            device->download(payload.first(n), delta.data());
            device->upload_add(x_hat.data(), payload.first(n));
            return;
        }
        std::copy(delta.begin(), delta.begin() + static_cast<std::ptrdiff_t>(n), payload.begin());
        for (std::size_t v = 0; v < n; ++v) x_hat[v] += payload[v];
        return;
    }
    const auto out = std::as_writable_bytes(payload);
    if (device) {
        device->encode(*q, delta.data(), n, key, out);
        device->decode_add(*q, std::as_bytes(payload), key, x_hat.data(), n);
        return;
    }
    q->encode(delta.first(n), key, out);
    // x_hat moves by the decoded message, exactly as the receiver's copy will.
    q->decode_add(std::as_bytes(payload), key, x_hat);
}

void decode_delta(const optim::Compressor* q, std::span<const float> payload,
                  const optim::CodecKey& key, std::span<float> x_hat, Device* device) {
    const std::size_t n = x_hat.size();
    if (!q && device) return device->upload_add(x_hat.data(), payload.first(n));
    if (!q) {
        for (std::size_t v = 0; v < n; ++v) x_hat[v] += payload[v];
        return;
    }
    if (device) return device->decode_add(*q, std::as_bytes(payload), key, x_hat.data(), n);
    q->decode_add(std::as_bytes(payload), key, x_hat);
}

}  // namespace gossamer::proto
