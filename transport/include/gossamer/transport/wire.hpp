#pragma once
/// The wire header (DESIGN.md, "Wire format"; layout in docs/modules/transport.md): kHeaderBytes
/// bytes, little-endian, written before every payload. A receiver decodes and checks it before it
/// touches the payload; a header that fails a check is dropped and counted, never applied.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "gossamer/transport/message.hpp"

namespace gossamer::transport {

inline constexpr std::uint32_t kWireMagic = 0x5253'5347;  ///< "GSSR" in little-endian bytes
inline constexpr std::uint16_t kWireVersion = 1;

/// Why a received message was dropped.
enum class DropReason : std::uint8_t {
    short_header,    ///< fewer than kHeaderBytes bytes of header
    bad_magic,       ///< not a Gossamer message
    bad_version,     ///< another wire version
    wrong_job,       ///< another job's message
    bad_kind,        ///< not a MessageKind
    wrong_sender,    ///< the sender field is not the peer it came from
    wrong_receiver,  ///< addressed to another rank
    bad_size,        ///< payload bytes != 4 * elements, != bytes that arrived, or above the limit
    not_member,      ///< from a peer this one failed (lost, or declared lost by the job)
};
inline constexpr std::size_t kDropReasons = 9;

std::string_view to_string(DropReason reason) noexcept;

/// Counters of dropped messages, one per reason. Thread-safe to read while a backend counts.
struct DropCounters {
    std::array<std::atomic<std::uint64_t>, kDropReasons> by_reason{};
    void add(DropReason r) noexcept { by_reason[static_cast<std::size_t>(r)].fetch_add(1); }
    std::uint64_t operator[](DropReason r) const noexcept {
        return by_reason[static_cast<std::size_t>(r)].load();
    }
    std::uint64_t total() const noexcept;
};

/// Writes m's header fields (payload bytes = 4 * m.elements) for `job_id` into out.
void encode_header(const Message& m, std::uint64_t job_id,
                   std::span<std::byte, kHeaderBytes> out) noexcept;

/// What the receiver knows when it checks a header.
struct HeaderExpectation {
    std::uint64_t job_id = 0;
    int receiver = 0;               ///< this rank
    int sender = -1;                ///< the peer the bytes came from (-1: not known)
    int size = 1;                   ///< ranks in the job: the sender field must be below it
    std::uint64_t max_payload = 0;  ///< the largest payload accepted, in bytes
};

/// The outcome of decode_header: ok, or the reason and a one-line detail ("job 0x2a, expected
/// 0x7").
struct HeaderCheck {
    bool ok = false;
    DropReason reason = DropReason::short_header;
    std::string detail;
};

/// Decodes `header` into m's header fields (not its payload) and checks magic, version, job,
/// kind, sender, receiver and that payload bytes equal 4 * elements, the limit and, when
/// arrived_bytes >= 0, the bytes that arrived. m is meaningful only when the check is ok.
HeaderCheck decode_header(std::span<const std::byte> header, const HeaderExpectation& expect,
                          std::int64_t arrived_bytes, Message& m);

/// The largest payload a peer of a model of `parameters` values ever sends, in bytes: what a
/// joined peer sets TransportOptions::max_payload_bytes to, so that a longer announcement is
/// dropped before a byte of it is received or allocated (docs/operations/reliability.md,
/// "Security"). Twice a raw model (top-k at fraction 1 sends an index with every value; int8, fp16,
/// a raw model and the exact average's model and mass all take less) plus 64 bytes for the
/// protocols' control messages.
std::uint64_t largest_payload_bytes(std::uint64_t parameters) noexcept;

/// Payload bytes a header announces (no checks; 0 for a short header).
std::uint64_t announced_payload_bytes(std::span<const std::byte> header) noexcept;

/// The sender field of a header (no checks; -1 for a short header): for the later pieces of a
/// message whose first piece's header was checked (the UCX backend's eager fragments).
int announced_sender(std::span<const std::byte> header) noexcept;

}  // namespace gossamer::transport
