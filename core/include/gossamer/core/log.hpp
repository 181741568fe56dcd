#pragma once
/// Levelled logging to stderr with fmt. The level comes from GOSSAMER_LOG_LEVEL
/// (error, warn, info, debug, trace; default info) and can be changed at run time.

#include <fmt/format.h>

#include <string_view>

namespace gossamer::log {

enum class Level { error = 0, warn = 1, info = 2, debug = 3, trace = 4 };

/// The current threshold; messages above it are dropped before formatting.
Level level() noexcept;
void set_level(Level l) noexcept;
/// Lowers warn and info to error for its lifetime (debug and trace stay, for who asked for them)
/// and restores the level after: for teardowns that race by design, whose "peer went away" lines
/// are not news.
class QuietScope {
  public:
    QuietScope() noexcept : saved_(level()) {
        if (saved_ > Level::error && saved_ < Level::debug) set_level(Level::error);
    }
    ~QuietScope() { set_level(saved_); }
    QuietScope(const QuietScope&) = delete;
    QuietScope& operator=(const QuietScope&) = delete;

  private:
    Level saved_;
};
/// Parses "error".."trace" (case-insensitive); returns false for anything else.
bool parse_level(std::string_view text, Level& out) noexcept;
/// Writes one line "[gossamer LEVEL] message" to stderr, whole (thread-safe).
void write(Level l, std::string_view message);

inline bool enabled(Level l) noexcept {
    return static_cast<int>(l) <= static_cast<int>(level());
}

template <typename... Args>
void error(fmt::format_string<Args...> f, Args&&... args) {
    if (enabled(Level::error)) write(Level::error, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
    if (enabled(Level::warn)) write(Level::warn, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
    if (enabled(Level::info)) write(Level::info, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) {
    if (enabled(Level::debug)) write(Level::debug, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void trace(fmt::format_string<Args...> f, Args&&... args) {
    if (enabled(Level::trace)) write(Level::trace, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace gossamer::log
