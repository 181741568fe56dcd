#pragma once
/// A message between peers as protocols and drivers see it: the fields of the wire header
/// (DESIGN.md, "Wire format") and an owned payload. The transport backends encode the header with
/// magic, version and job id (wire.hpp) and check it before a payload is touched; protocols never
/// see those.

#include <cstdint>
#include <string_view>
#include <vector>

namespace gossamer::transport {

enum class MessageKind : std::uint8_t {
    full_model = 1,   ///< a whole model (start-up, join, replica re-synchronisation)
    model_delta = 2,  ///< Q(x - x_hat) against an edge replica (dpsgd, choco)
    mass_share = 3,   ///< a push-sum share of (x, w) (sgp, async)
    reduce = 4,       ///< a chunk of a ring all-reduce (reduce-scatter or all-gather)
    control = 5,      ///< protocol control without model values
};

std::string_view to_string(MessageKind kind) noexcept;

/// Bytes of the fixed wire header, counted in every message's size. The layout is in wire.hpp
/// and docs/modules/transport.md: 14 fields, two of them doubles, do not fit in 64 bytes.
inline constexpr std::uint64_t kHeaderBytes = 88;

struct Message {
    MessageKind kind = MessageKind::control;
    int sender = -1;
    int receiver = -1;
    std::uint64_t edge_seq = 0;   ///< per directed edge (sender, receiver), from 0
    std::int64_t round = 0;       ///< the sender's round (or all-reduce step)
    std::uint32_t partition = 0;  ///< partition id in the layout
    std::uint32_t chunk = 0;      ///< chunk index (all-reduce)
    std::uint64_t offset = 0;     ///< first element of the payload within the partition
    std::uint8_t codec = 0;       ///< payload encoding: 0 raw float32, else the compressor's id
    double weight = 0.0;          ///< push-sum weight share (mass_share)
    double sent_at = 0.0;         ///< the sender's clock at send (seconds; staleness metrics)
    std::uint64_t elements = 0;   ///< float32 values the message carries
    std::vector<float> payload;   ///< the values (empty in cost-only simulation)
    /// The values were received straight into the buffer the receiver named for this header
    /// (Transport::on_place, Protocol::receive_into); `payload` is then empty.
    bool placed = false;

    /// Bytes on the wire: header plus payload.
    std::uint64_t wire_bytes() const noexcept { return kHeaderBytes + elements * sizeof(float); }
};

}  // namespace gossamer::transport
