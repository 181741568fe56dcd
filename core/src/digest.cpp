#include "gossamer/core/digest.hpp"

#include <bit>

namespace gossamer {

Digest& Digest::bytes(const void* data, std::size_t size) noexcept {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < size; ++i) h_ = (h_ ^ p[i]) * 0x100000001b3ull;
    return *this;
}

Digest& Digest::u64(std::uint64_t v) noexcept {
    unsigned char b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
    return bytes(b, sizeof b);
}

Digest& Digest::f64(double v) noexcept {
    return u64(std::bit_cast<std::uint64_t>(v));
}

Digest& Digest::text(std::string_view s) noexcept {
    u64(s.size());
    return bytes(s.data(), s.size());
}

}  // namespace gossamer
