#include "gossamer/core/state_io.hpp"

#include <fmt/format.h>

#include <bit>
#include <cstring>

#include "gossamer/core/error.hpp"

namespace gossamer {

static_assert(std::endian::native == std::endian::little, "checkpoint state is little-endian");

void StateWriter::raw(const void* p, std::size_t n) {
    const auto* c = static_cast<const char*>(p);
    bytes_.insert(bytes_.end(), c, c + n);
}
void StateWriter::u32(std::uint32_t v) {
    raw(&v, sizeof v);
}
void StateWriter::u64(std::uint64_t v) {
    raw(&v, sizeof v);
}
void StateWriter::i64(std::int64_t v) {
    raw(&v, sizeof v);
}
void StateWriter::f64(double v) {
    raw(&v, sizeof v);
}
void StateWriter::floats(std::span<const float> v) {
    u64(v.size());
    raw(v.data(), v.size_bytes());
}
void StateWriter::doubles(std::span<const double> v) {
    u64(v.size());
    raw(v.data(), v.size_bytes());
}
void StateWriter::string(std::string_view s) {
    u64(s.size());
    raw(s.data(), s.size());
}

void StateReader::fail(const std::string& what) const {
    throw ConfigError(label_, "", what,
                      "the checkpoint is incomplete, corrupt or of another job; resume from "
                      "another step or start the job afresh");
}

const char* StateReader::take(std::size_t n, const char* what) {
    if (n > bytes_.size() - pos_)
        fail(fmt::format("truncated checkpoint state (while reading {})", what));
    const char* p = bytes_.data() + pos_;
    pos_ += n;
    return p;
}

std::uint32_t StateReader::u32(const char* what) {
    std::uint32_t v;
    std::memcpy(&v, take(sizeof v, what), sizeof v);
    return v;
}
std::uint64_t StateReader::u64(const char* what) {
    std::uint64_t v;
    std::memcpy(&v, take(sizeof v, what), sizeof v);
    return v;
}
std::int64_t StateReader::i64(const char* what) {
    std::int64_t v;
    std::memcpy(&v, take(sizeof v, what), sizeof v);
    return v;
}
std::int64_t StateReader::counter(const char* what) {
    const auto v = i64(what);
    if (v < -1 || v > (std::int64_t{1} << 53))
        fail(fmt::format("{} is {}, not a step or round count", what, v));
    return v;
}
double StateReader::f64(const char* what) {
    double v;
    std::memcpy(&v, take(sizeof v, what), sizeof v);
    return v;
}
bool StateReader::boolean(const char* what) {
    const auto v = u32(what);
    if (v > 1) fail(fmt::format("{} is {}, not a boolean", what, v));
    return v == 1;
}
std::uint64_t StateReader::count(const char* what, std::uint64_t most) {
    const auto v = u64(what);
    if (v > most) fail(fmt::format("{} is {}, more than {}", what, v, most));
    return v;
}
std::vector<float> StateReader::floats(const char* what) {
    const auto n = count(what, (bytes_.size() - pos_) / sizeof(float));
    std::vector<float> v(n);
    const auto* src = take(n * sizeof(float), what);
    if (n > 0)
        std::memcpy(v.data(), src, n * sizeof(float));  // an empty vector's data() may be null
    return v;
}
void StateReader::floats_into(const char* what, std::span<float> out) {
    const auto n = u64(what);
    if (n != out.size())
        fail(fmt::format("{} holds {} values where this job has {}", what, n, out.size()));
    const auto* src = take(n * sizeof(float), what);
    if (n > 0)
        std::memcpy(out.data(), src, n * sizeof(float));  // an empty vector's data() may be null
}
std::vector<double> StateReader::doubles(const char* what) {
    const auto n = count(what, (bytes_.size() - pos_) / sizeof(double));
    std::vector<double> v(n);
    const auto* src = take(n * sizeof(double), what);
    if (n > 0)
        std::memcpy(v.data(), src, n * sizeof(double));  // an empty vector's data() may be null
    return v;
}
std::string StateReader::string(const char* what) {
    const auto n = count(what, bytes_.size() - pos_);
    return std::string(take(n, what), n);
}
std::string_view StateReader::bytes(std::uint64_t n, const char* what) {
    if (n > bytes_.size() - pos_)
        fail(fmt::format("truncated checkpoint state (while reading {})", what));
    return {take(n, what), n};
}
void StateReader::tag(std::string_view name) {
    const std::string got = string("a section tag");
    if (got != name)
        fail(fmt::format("the state holds section '{}' where '{}' belongs", got, name));
}
void StateReader::finish() {
    if (pos_ != bytes_.size())
        fail(fmt::format("{} bytes of state left over", bytes_.size() - pos_));
}

}  // namespace gossamer
