#pragma once
/// "0, 1, 3" (or "none"): a list of ranks in one-line messages.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <span>
#include <string>

namespace gossamer {

inline std::string ranks_text(std::span<const int> ranks) {
    return ranks.empty() ? std::string("none") : fmt::format("{}", fmt::join(ranks, ", "));
}

}  // namespace gossamer
