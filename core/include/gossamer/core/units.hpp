#pragma once
/// Parsing and printing of sizes given by users ("4MiB", "100MB", "4096").

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gossamer {

/// Parses a byte count: a non-negative integer with an optional suffix B, KB, MB, GB (powers of
/// 1000) or KiB, MiB, GiB (powers of 1024), case-insensitive. nullopt when malformed.
std::optional<std::uint64_t> parse_bytes(std::string_view text);

/// "4.00 MiB", "512 B": for tables.
std::string format_bytes(double bytes);

}  // namespace gossamer
