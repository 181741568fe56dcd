#include "gossamer/core/memory.hpp"

#include <fmt/format.h>
#include <sys/resource.h>

#include <exception>
#include <fstream>
#include <sstream>

#include "gossamer/core/error.hpp"
#include "gossamer/core/units.hpp"

namespace gossamer {
namespace {

// The value of `key` in a "Key:   123 kB" file (/proc/meminfo, /proc/self/status), in bytes.
std::optional<double> kib_field(const char* file, std::string_view key) {
    std::ifstream in(file);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind(key, 0) != 0 || line.size() <= key.size() || line[key.size()] != ':')
            continue;
        std::istringstream ss(line.substr(key.size() + 1));
        double kib = 0;
        if (ss >> kib) return kib * 1024;
    }
    return std::nullopt;
}

// A number in a one-line cgroup file ("max" or missing: none).
std::optional<double> cgroup_value(const char* file) {
    std::ifstream in(file);
    std::string text;
    if (!(in >> text) || text == "max") return std::nullopt;
    try {
        return std::stod(text);
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

void consider(std::optional<MemoryLimit>& best, double bytes, std::string source) {
    if (bytes < 0) bytes = 0;
    if (!best || bytes < best->bytes) best = MemoryLimit{bytes, std::move(source)};
}

thread_local std::string t_failed;
thread_local bool t_recorded = false;

}  // namespace

std::optional<MemoryLimit> memory_limit() {
    std::optional<MemoryLimit> best;
    if (auto avail = kib_field("/proc/meminfo", "MemAvailable"))
        consider(best, *avail, "MemAvailable in /proc/meminfo");
    rlimit rl{};
    if (::getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        const double mapped = kib_field("/proc/self/status", "VmSize").value_or(0);
        consider(best, static_cast<double>(rl.rlim_cur) - mapped,
                 fmt::format("RLIMIT_AS (ulimit -v {}) less the {} mapped now", rl.rlim_cur / 1024,
                             format_bytes(mapped)));
    }
    if (auto max = cgroup_value("/sys/fs/cgroup/memory.max")) {
        const double used = cgroup_value("/sys/fs/cgroup/memory.current").value_or(0);
        consider(best, *max - used, "the cgroup's memory.max less its memory.current");
    }
    return best;
}

void check_memory(double bytes, std::string_view what, const std::string& file,
                  const std::string& path, std::string_view fix) {
    const auto limit = memory_limit();
    if (!limit || bytes <= limit->bytes) return;
    throw ConfigError(
        file, path,
        fmt::format("{} needs about {} of memory, more than the {} that {} leaves", what,
                    format_bytes(bytes), format_bytes(limit->bytes), limit->source),
        std::string(fix));
}

AllocationScope::AllocationScope(std::string what)
    : what_(std::move(what)), uncaught_(std::uncaught_exceptions()) {
    if (uncaught_ == 0) {
        t_recorded = false;
        t_failed.clear();
    }
}

AllocationScope::~AllocationScope() {
    if (std::uncaught_exceptions() > uncaught_ && !t_recorded) {
        t_recorded = true;
        try {
            t_failed = what_;
        } catch (...) {  // too little memory even for the name: report without it
        }
    }
}

std::string failed_allocation() {
    return t_failed;
}

}  // namespace gossamer
