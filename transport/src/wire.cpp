#include "gossamer/transport/wire.hpp"

#include <fmt/format.h>

#include <bit>
#include <cstring>

namespace gossamer::transport {
namespace {

// Offsets of the fields; docs/modules/transport.md has the same table.
constexpr std::size_t kMagic = 0, kVersion = 4, kKind = 6, kCodec = 7, kJob = 8, kSender = 16,
                      kReceiver = 20, kPartition = 24, kChunk = 28, kEdgeSeq = 32, kRound = 40,
                      kOffset = 48, kElements = 56, kPayload = 64, kWeight = 72, kSentAt = 80;
static_assert(kSentAt + 8 == kHeaderBytes);

template <typename T>
void put(std::byte* out, std::size_t at, T value) noexcept {
    static_assert(std::is_unsigned_v<T>);
    for (std::size_t i = 0; i < sizeof(T); ++i)
        out[at + i] = static_cast<std::byte>((value >> (8 * i)) & 0xff);
}

template <typename T>
T get(const std::byte* in, std::size_t at) noexcept {
    T v = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i)
        v = static_cast<T>(v | (static_cast<T>(std::to_integer<unsigned>(in[at + i])) << (8 * i)));
    return v;
}

bool valid_kind(std::uint8_t k) noexcept {
    return k >= static_cast<std::uint8_t>(MessageKind::full_model) &&
           k <= static_cast<std::uint8_t>(MessageKind::control);
}

HeaderCheck drop(DropReason r, std::string detail) {
    return {false, r, std::move(detail)};
}

}  // namespace

std::string_view to_string(DropReason reason) noexcept {
    switch (reason) {
        case DropReason::short_header:
            return "short header";
        case DropReason::bad_magic:
            return "bad magic";
        case DropReason::bad_version:
            return "wrong wire version";
        case DropReason::wrong_job:
            return "wrong job id";
        case DropReason::bad_kind:
            return "unknown message kind";
        case DropReason::wrong_sender:
            return "wrong sender";
        case DropReason::wrong_receiver:
            return "wrong receiver";
        case DropReason::bad_size:
            return "bad payload size";
        case DropReason::not_member:
            return "from a failed peer";
    }
    return "?";
}

std::uint64_t DropCounters::total() const noexcept {
    std::uint64_t t = 0;
    for (const auto& c : by_reason) t += c.load();
    return t;
}

void encode_header(const Message& m, std::uint64_t job_id,
                   std::span<std::byte, kHeaderBytes> out) noexcept {
    std::byte* o = out.data();
    put<std::uint32_t>(o, kMagic, kWireMagic);
    put<std::uint16_t>(o, kVersion, kWireVersion);
    put<std::uint8_t>(o, kKind, static_cast<std::uint8_t>(m.kind));
    put<std::uint8_t>(o, kCodec, m.codec);
    put<std::uint64_t>(o, kJob, job_id);
    put<std::uint32_t>(o, kSender, static_cast<std::uint32_t>(m.sender));
    put<std::uint32_t>(o, kReceiver, static_cast<std::uint32_t>(m.receiver));
    put<std::uint32_t>(o, kPartition, m.partition);
    put<std::uint32_t>(o, kChunk, m.chunk);
    put<std::uint64_t>(o, kEdgeSeq, m.edge_seq);
    put<std::uint64_t>(o, kRound, static_cast<std::uint64_t>(m.round));
    put<std::uint64_t>(o, kOffset, m.offset);
    put<std::uint64_t>(o, kElements, m.elements);
    put<std::uint64_t>(o, kPayload, m.elements * sizeof(float));
    put<std::uint64_t>(o, kWeight, std::bit_cast<std::uint64_t>(m.weight));
    put<std::uint64_t>(o, kSentAt, std::bit_cast<std::uint64_t>(m.sent_at));
}

std::uint64_t largest_payload_bytes(std::uint64_t parameters) noexcept {
    return 8 * parameters + 64;
}

std::uint64_t announced_payload_bytes(std::span<const std::byte> header) noexcept {
    return header.size() < kHeaderBytes ? 0 : get<std::uint64_t>(header.data(), kPayload);
}

int announced_sender(std::span<const std::byte> header) noexcept {
    return header.size() < kHeaderBytes
               ? -1
               : static_cast<std::int32_t>(get<std::uint32_t>(header.data(), kSender));
}

HeaderCheck decode_header(std::span<const std::byte> header, const HeaderExpectation& expect,
                          std::int64_t arrived_bytes, Message& m) {
    if (header.size() < kHeaderBytes)
        return drop(DropReason::short_header,
                    fmt::format("{} header bytes, expected {}", header.size(), kHeaderBytes));
    const std::byte* in = header.data();
    if (auto magic = get<std::uint32_t>(in, kMagic); magic != kWireMagic)
        return drop(DropReason::bad_magic, fmt::format("magic {:#010x}", magic));
    if (auto v = get<std::uint16_t>(in, kVersion); v != kWireVersion)
        return drop(DropReason::bad_version,
                    fmt::format("wire version {}, expected {}", v, kWireVersion));
    if (auto job = get<std::uint64_t>(in, kJob); job != expect.job_id)
        return drop(DropReason::wrong_job,
                    fmt::format("job id {:#x}, expected {:#x}", job, expect.job_id));
    const auto kind = get<std::uint8_t>(in, kKind);
    if (!valid_kind(kind)) return drop(DropReason::bad_kind, fmt::format("kind {}", kind));
    const auto sender = static_cast<std::int32_t>(get<std::uint32_t>(in, kSender));
    if (sender < 0 || sender >= expect.size || sender == expect.receiver)
        return drop(
            DropReason::wrong_sender,
            fmt::format("sender field {} outside the other ranks of [0, {})", sender, expect.size));
    if (expect.sender >= 0 && sender != expect.sender)
        return drop(DropReason::wrong_sender,
                    fmt::format("sender field {}, but it came from {}", sender, expect.sender));
    const auto receiver = static_cast<std::int32_t>(get<std::uint32_t>(in, kReceiver));
    if (receiver != expect.receiver)
        return drop(DropReason::wrong_receiver,
                    fmt::format("addressed to {}, this is {}", receiver, expect.receiver));
    const auto elements = get<std::uint64_t>(in, kElements);
    const auto payload = get<std::uint64_t>(in, kPayload);
    if (elements > payload / sizeof(float) || payload != elements * sizeof(float))
        return drop(DropReason::bad_size,
                    fmt::format("{} payload bytes for {} elements", payload, elements));
    if (payload > expect.max_payload)
        return drop(DropReason::bad_size,
                    fmt::format("{} payload bytes, limit {}", payload, expect.max_payload));
    if (arrived_bytes >= 0 && payload != static_cast<std::uint64_t>(arrived_bytes))
        return drop(DropReason::bad_size,
                    fmt::format("{} payload bytes announced, {} arrived", payload, arrived_bytes));
    m.kind = static_cast<MessageKind>(kind);
    m.codec = get<std::uint8_t>(in, kCodec);
    m.sender = sender;
    m.receiver = receiver;
    m.partition = get<std::uint32_t>(in, kPartition);
    m.chunk = get<std::uint32_t>(in, kChunk);
    m.edge_seq = get<std::uint64_t>(in, kEdgeSeq);
    m.round = static_cast<std::int64_t>(get<std::uint64_t>(in, kRound));
    m.offset = get<std::uint64_t>(in, kOffset);
    m.elements = elements;
    m.weight = std::bit_cast<double>(get<std::uint64_t>(in, kWeight));
    m.sent_at = std::bit_cast<double>(get<std::uint64_t>(in, kSentAt));
    return {true, DropReason::short_header, {}};
}

}  // namespace gossamer::transport
