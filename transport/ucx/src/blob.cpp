#include "blob.hpp"

#include <fmt/format.h>

#include "gossamer/core/digest.hpp"

namespace gossamer::transport::ucx_blob {
namespace {

constexpr std::uint32_t kMagic = 0x41555347;  // "GSUA"
constexpr std::size_t kFrame = 4 + 4 + 8 + 8 + 8;

void put(std::vector<std::byte>& out, std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xff));
}
std::uint64_t get(std::span<const std::byte> in, std::size_t at, int bytes) {
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i)
        v |= static_cast<std::uint64_t>(
                 std::to_integer<unsigned>(in[at + static_cast<std::size_t>(i)]))
             << (8 * i);
    return v;
}
std::uint64_t fnv1a(std::span<const std::byte> data) {
    return Digest().bytes(data.data(), data.size()).value();
}

}  // namespace

std::vector<std::byte> frame(std::uint64_t job_id, int rank, std::span<const std::byte> address) {
    std::vector<std::byte> out;
    out.reserve(kFrame + address.size());
    put(out, kMagic, 4);
    put(out, static_cast<std::uint32_t>(rank), 4);
    put(out, job_id, 8);
    put(out, address.size(), 8);
    put(out, fnv1a(address), 8);
    out.insert(out.end(), address.begin(), address.end());
    return out;
}

Unframed unframe(std::span<const std::byte> blob, std::uint64_t job_id, int rank) {
    Unframed u;
    if (blob.size() < kFrame) {
        u.error =
            fmt::format("malformed address blob ({} bytes, a frame needs {})", blob.size(), kFrame);
        return u;
    }
    if (get(blob, 0, 4) != kMagic) {
        u.error = "malformed address blob (not a Gossamer UCX address)";
        return u;
    }
    if (auto r = static_cast<int>(get(blob, 4, 4)); r != rank) {
        u.error = fmt::format("the address blob is rank {}'s", r);
        return u;
    }
    if (auto j = get(blob, 8, 8); j != job_id) {
        u.error = fmt::format("the address blob is from job {:#x}, this is job {:#x}", j, job_id);
        return u;
    }
    const auto len = get(blob, 16, 8);
    if (len != blob.size() - kFrame) {
        u.error = fmt::format("truncated address blob ({} address bytes announced, {} present)",
                              len, blob.size() - kFrame);
        return u;
    }
    auto address = blob.subspan(kFrame);
    if (fnv1a(address) != get(blob, 24, 8)) {
        u.error = "corrupted address blob (checksum mismatch)";
        return u;
    }
    u.ok = true;
    u.address.assign(address.begin(), address.end());
    return u;
}

}  // namespace gossamer::transport::ucx_blob
