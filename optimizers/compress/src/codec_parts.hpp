#pragma once
// What the compressors of compressor.cpp and int4.cpp share: buffer checks, the key's seed and
// the scan for a non-finite float. Private to optimizers/compress/.

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <utility>

#include "gossamer/core/error.hpp"
#include "gossamer/core/rng.hpp"
#include "gossamer/optimizers/compress/compressor.hpp"

namespace gossamer::optim::detail {

inline void check_out(std::span<std::byte> out, std::size_t need, std::string_view name) {
    if (out.size() < need)
        throw Error(fmt::format("{}: encoding needs {} bytes, the buffer holds {}", name, need,
                                out.size()));
    std::fill(out.begin() + static_cast<std::ptrdiff_t>(need), out.end(), std::byte{0});
}

inline void check_in(std::span<const std::byte> in, std::size_t need, std::string_view name) {
    if (in.size() < need)
        throw Error(fmt::format("{}: a message of {} bytes, expected {}", name, in.size(), need));
}

inline std::uint64_t rng_seed(std::uint64_t config_seed, const CodecKey& key) {
    return derive_seed(derive_seed(derive_seed(config_seed, key.seed), key.stream), key.index);
}

// The first of `count` floats at the start of `in` that is NaN or infinite, as (its position
// times `stride`, its value). `in` may be unaligned: the values are copied out one by one.
inline std::optional<std::pair<std::size_t, float>> first_non_finite_float(
    std::span<const std::byte> in, std::size_t count, std::size_t stride) {
    for (std::size_t i = 0; i < count; ++i) {
        float v;
        std::memcpy(&v, in.data() + 4 * i, 4);
        if (!std::isfinite(v)) return std::pair{i * stride, v};
    }
    return std::nullopt;
}

/// The int4 codec (int4.cpp). block in [1, kInt4MaxBlock] (Error otherwise).
std::unique_ptr<Compressor> make_int4(std::size_t block, std::uint64_t seed);

}  // namespace gossamer::optim::detail
