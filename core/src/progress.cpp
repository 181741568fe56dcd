#include "gossamer/core/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace gossamer {

Progress::Progress(double plain_interval)
    : tty_(isatty(STDERR_FILENO) != 0),
      plain_interval_(plain_interval),
      start_(std::chrono::steady_clock::now()) {}

double Progress::elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::operator()(std::string_view line, bool force) {
    if (!tty_ && plain_interval_ <= 0) return;
    const double now = elapsed();
    if (!force && now - last_ < (tty_ ? 0.2 : plain_interval_) && (printed_ || !tty_)) return;
    last_ = now;
    const std::string text = fmt::format("[{:>6.1f}s] {}", now, line);
    if (tty_) {
        std::fprintf(stderr, "\r\033[K%s", text.c_str());
        printed_ = true;
    } else {
        std::fprintf(stderr, "%s\n", text.c_str());
    }
    std::fflush(stderr);
}

void Progress::done() {
    if (tty_ && printed_) std::fputs("\r\033[K", stderr);
    printed_ = false;
}

std::string format_duration(double s) {
    if (!(s >= 0) || s > 1e7) return "?";
    const auto t = static_cast<long>(s + 0.5);
    if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, (t % 3600) / 60);
    if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
    return fmt::format("{}s", t);
}

}  // namespace gossamer
