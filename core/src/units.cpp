#include "gossamer/core/units.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace gossamer {

std::optional<std::uint64_t> parse_bytes(std::string_view text) {
    std::uint64_t value = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || ptr == text.data()) return std::nullopt;
    std::string suffix(ptr, text.data() + text.size());
    std::transform(suffix.begin(), suffix.end(), suffix.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    struct Unit {
        const char* name;
        std::uint64_t factor;
    };
    static constexpr Unit units[] = {{"", 1},
                                     {"b", 1},
                                     {"kb", 1000},
                                     {"mb", 1000 * 1000},
                                     {"gb", 1000000000},
                                     {"kib", 1024},
                                     {"mib", 1 << 20},
                                     {"gib", 1ull << 30}};
    for (const auto& u : units) {
        if (suffix == u.name) {
            if (value > UINT64_MAX / u.factor) return std::nullopt;
            return value * u.factor;
        }
    }
    return std::nullopt;
}

std::string format_bytes(double bytes) {
    if (bytes < 1024) return fmt::format("{:.0f} B", bytes);
    const char* names[] = {"KiB", "MiB", "GiB", "TiB"};
    int i = -1;
    while (bytes >= 1024 && i < 3) {
        bytes /= 1024;
        ++i;
    }
    return fmt::format("{:.2f} {}", bytes, names[i]);
}

}  // namespace gossamer
