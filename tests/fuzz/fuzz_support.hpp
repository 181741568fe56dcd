// What the fuzz targets share (docs/operations/reliability.md, "Fuzzing"): a reader that splits the
// fuzzer's bytes into the parameters a decoder needs, and check(), which aborts with a line when
// a decoder breaks an invariant (libFuzzer and the replay driver both report the abort).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace gossamer::fuzz {

/// Aborts with `what` unless `ok`: a decoder that accepted bytes must decode them consistently.
inline void check(bool ok, const char* what) {
    if (ok) return;
    std::fprintf(stderr, "fuzz invariant broken: %s\n", what);
    std::abort();
}

/// Little-endian fields from the front of the input; missing bytes read as zero.
class Input {
  public:
    Input(const std::uint8_t* data, std::size_t size) : bytes_(data, size) {}
    std::uint64_t take(std::size_t width) {
        std::uint64_t v = 0;
        for (std::size_t i = 0; i < width && pos_ < bytes_.size(); ++i, ++pos_)
            v |= std::uint64_t{bytes_[pos_]} << (8 * i);
        return v;
    }
    std::uint8_t u8() { return static_cast<std::uint8_t>(take(1)); }
    std::uint16_t u16() { return static_cast<std::uint16_t>(take(2)); }
    std::uint32_t u32() { return static_cast<std::uint32_t>(take(4)); }
    std::uint64_t u64() { return take(8); }
    /// What is left after the fields taken so far.
    std::span<const std::uint8_t> rest() const { return bytes_.subspan(pos_); }
    std::span<const std::byte> rest_bytes() const { return std::as_bytes(rest()); }
    std::string_view rest_text() const {
        auto r = rest();
        return {reinterpret_cast<const char*>(r.data()), r.size()};
    }

  private:
    std::span<const std::uint8_t> bytes_;
    std::size_t pos_ = 0;
};

}  // namespace gossamer::fuzz
