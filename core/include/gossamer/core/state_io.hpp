#pragma once
/// Little-endian byte streams for the state a checkpoint holds (docs/operations/checkpoint.md):
/// what a local optimizer, a worker or a protocol saves and restores. The writer appends; the
/// reader checks every read against the bytes left, so a truncated or corrupt state is refused with
/// one ConfigError naming the file and what was being read, never read past its end.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gossamer {

class StateWriter {
  public:
    void u32(std::uint32_t v);
    void u64(std::uint64_t v);
    void i64(std::int64_t v);
    void f64(double v);
    void boolean(bool v) { u32(v ? 1 : 0); }
    /// A length (u64) and the values.
    void floats(std::span<const float> v);
    void doubles(std::span<const double> v);
    void string(std::string_view s);
    /// A tag that the reader checks (a section's name): a state read by the wrong code fails.
    void tag(std::string_view name) { string(name); }
    const std::vector<char>& bytes() const noexcept { return bytes_; }

  private:
    void raw(const void* p, std::size_t n);
    std::vector<char> bytes_;
};

class StateReader {
  public:
    /// `label` names the file in errors; `bytes` must outlive the reader.
    StateReader(std::string label, std::string_view bytes)
        : label_(std::move(label)), bytes_(bytes) {}
    std::uint32_t u32(const char* what);
    std::uint64_t u64(const char* what);
    std::int64_t i64(const char* what);
    /// A step or round counter: fails unless -1 <= v <= 2^53 (a counter that arithmetic on it,
    /// such as t - 1 or the next cut, cannot overflow).
    std::int64_t counter(const char* what);
    double f64(const char* what);
    bool boolean(const char* what);
    /// A count read from the state, refused past `most` (so a corrupt count allocates nothing).
    std::uint64_t count(const char* what, std::uint64_t most);
    std::vector<float> floats(const char* what);
    /// Exactly `out.size()` values, else the state does not fit.
    void floats_into(const char* what, std::span<float> out);
    std::vector<double> doubles(const char* what);
    std::string string(const char* what);
    /// The next n bytes as they are.
    std::string_view bytes(std::uint64_t n, const char* what);
    /// Throws unless the next string is `name`.
    void tag(std::string_view name);
    /// Throws unless every byte was read.
    void finish();
    /// Throws ConfigError naming the file: the state does not fit (what, and the fix).
    [[noreturn]] void fail(const std::string& what) const;
    const std::string& label() const noexcept { return label_; }

  private:
    const char* take(std::size_t n, const char* what);
    std::string label_;
    std::string_view bytes_;
    std::size_t pos_ = 0;
};

}  // namespace gossamer
