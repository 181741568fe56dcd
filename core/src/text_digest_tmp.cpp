// TEMPORARY (branch i42-gpt): vocabulary_digest until the lead's core/src/text.cpp lands on main;
// delete this file (and its CMake entry) when merging main.

#include <fmt/format.h>
#include <zlib.h>

#include "gossamer/core/text.hpp"

namespace gossamer {

std::string vocabulary_digest(std::string_view vocabulary) {
    const auto crc = crc32(0L, reinterpret_cast<const Bytef*>(vocabulary.data()),
                           static_cast<uInt>(vocabulary.size()));
    return fmt::format("{:08x}", static_cast<std::uint32_t>(crc));
}

}  // namespace gossamer
