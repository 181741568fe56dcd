#pragma once
/// A 64-bit FNV-1a hash fed piece by piece: stable across runs, platforms and compilers, so two
/// processes can compare what they hold by exchanging 8 bytes (partition layouts, peer lists,
/// handshake settings, address blobs).

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace gossamer {

class Digest {
  public:
    Digest& bytes(const void* data, std::size_t size) noexcept;
    Digest& text(std::string_view s) noexcept;  ///< length (u64), then the bytes
    Digest& u64(std::uint64_t v) noexcept;      ///< little-endian, whatever the host order
    Digest& f64(double v) noexcept;             ///< the bit pattern
    std::uint64_t value() const noexcept { return h_; }

  private:
    std::uint64_t h_ = 0xcbf29ce484222325ull;  // FNV-1a 64 offset basis
};

}  // namespace gossamer
