#include "gossamer/core/log.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace gossamer::log {
namespace {

Level initial_level() noexcept {
    Level l = Level::info;
    if (const char* env = std::getenv("GOSSAMER_LOG_LEVEL")) {
        if (!parse_level(env, l)) {
            std::fprintf(stderr,
                         "[gossamer warn] GOSSAMER_LOG_LEVEL='%s' is not one of "
                         "error, warn, info, debug, trace; using info\n",
                         env);
            l = Level::info;
        }
    }
    return l;
}

std::atomic<int>& current() {
    static std::atomic<int> value{static_cast<int>(initial_level())};
    return value;
}

constexpr const char* kNames[] = {"error", "warn", "info", "debug", "trace"};

}  // namespace

Level level() noexcept {
    return static_cast<Level>(current().load(std::memory_order_relaxed));
}

void set_level(Level l) noexcept {
    current().store(static_cast<int>(l), std::memory_order_relaxed);
}

bool parse_level(std::string_view text, Level& out) noexcept {
    std::string lower(text);
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    for (int i = 0; i < 5; ++i) {
        if (lower == kNames[i]) {
            out = static_cast<Level>(i);
            return true;
        }
    }
    if (lower == "warning") {
        out = Level::warn;
        return true;
    }
    return false;
}

void write(Level l, std::string_view message) {
    static std::mutex mutex;
    std::string line = fmt::format("[gossamer {}] {}\n", kNames[static_cast<int>(l)], message);
    std::lock_guard<std::mutex> lock(mutex);
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
}

}  // namespace gossamer::log
