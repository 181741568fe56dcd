#include "gossamer/core/output_dir.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include "gossamer/core/error.hpp"
#include "gossamer/core/file_io.hpp"
#include "gossamer/core/json.hpp"
#include "gossamer/core/version.hpp"
#include "output_lock.hpp"

namespace gossamer {
namespace {

namespace fs = std::filesystem;

// The marker and the temporary files it is written through (several peers may write it at
// once): none of them makes a folder "not empty".
bool is_marker_file(const fs::path& p) {
    return p.filename().string().rfind(std::string(kOutputMarker), 0) == 0;
}

class Fail {
  public:
    Fail(const OutputOrigin& origin) : origin_(origin) {}
    [[noreturn]] void operator()(const std::string& what, const std::string& fix = {}) const {
        throw ConfigError(origin_.file, origin_.path, what,
                          fix.empty() ? fmt::format("pick another {}", origin_.path) : fix);
    }

  private:
    const OutputOrigin& origin_;
};

// Why `dir` cannot be created: the nearest ancestor that exists, a file rather than a folder,
// or a folder that takes no new folders (/proc, a read-only file system).
std::string blocker(const fs::path& dir) {
    std::error_code ec;
    for (fs::path p = dir.parent_path(); !p.empty(); p = p.parent_path()) {
        const auto st = fs::status(p, ec);
        if (!ec && fs::exists(st))
            return fs::is_directory(st) ? fmt::format(" ({} takes no new folders)", p.string())
                                        : fmt::format(" ({} is a file, not a folder)", p.string());
        if (p == p.parent_path()) break;
    }
    return "";
}

// Writes the marker atomically (a temporary name, then a rename), which also proves that the
// folder takes new files.
void write_marker(const fs::path& dir, std::string_view command, const Fail& fail) {
    static std::atomic<int> counter{0};
    const json::Json j = {{"command", std::string(command)},
                          {"time", detail::now_utc()},
                          {"pid", static_cast<long>(::getpid())},
                          {"version", kVersion}};
    const std::string text = j.dump(2) + "\n";
    const fs::path target = dir / kOutputMarker;
    const fs::path tmp =
        dir / fmt::format("{}.tmp-{}-{}", kOutputMarker, ::getpid(), counter.fetch_add(1));
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        fail(fmt::format("cannot write into the output folder {}: {}", dir.string(),
                         std::strerror(errno)));
    const bool wrote = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    const int saved = errno;
    ::close(fd);
    if (!wrote || std::rename(tmp.c_str(), target.c_str()) != 0) {
        const int e = wrote ? errno : saved;
        ::unlink(tmp.c_str());
        fail(fmt::format("cannot write into the output folder {}: {}", dir.string(),
                         std::strerror(e)));
    }
}

// A probe file, created and removed: the folder takes new files.
void probe(const fs::path& dir, const Fail& fail) {
    const fs::path p = dir / fmt::format("{}.probe-{}", kOutputMarker, ::getpid());
    const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        fail(fmt::format("cannot write into the output folder {}: {}", dir.string(),
                         std::strerror(errno)));
    ::close(fd);
    ::unlink(p.c_str());
}

// "written by gossamer sim at 2024-05-01T10:00:00Z", from the marker (or nothing when the
// marker cannot be read: it still marks the folder).
std::string previous_run(const fs::path& dir) {
    std::ifstream in(dir / kOutputMarker);
    std::stringstream ss;
    ss << in.rdbuf();
    try {
        const auto j = json::Json::parse(ss.str());
        return fmt::format(" (written by {} at {})", j.value("command", "gossamer"),
                           j.value("time", "an unknown time"));
    } catch (const json::Json::exception&) {
        return "";
    }
}

// Whether `p` lies inside `dir` (both absolute and normal).
bool inside(const fs::path& p, const fs::path& dir) {
    auto [d, q] = std::mismatch(dir.begin(), dir.end(), p.begin(), p.end());
    for (; d != dir.end(); ++d)
        if (!d->empty()) return false;  // "a/b/" ends with an empty component
    return q != p.end();
}

// The first input this process has read that lies inside `dir`, by its path as written and by
// the file it resolves to (so neither a symbolic link nor "../" hides it).
std::optional<std::string> input_inside(const fs::path& dir) {
    std::error_code ec;
    const fs::path dir_abs = fs::absolute(dir, ec).lexically_normal();
    const fs::path dir_real = fs::weakly_canonical(dir, ec);
    for (const auto& input : input_files()) {
        const fs::path abs = fs::absolute(input, ec).lexically_normal();
        const fs::path real = fs::weakly_canonical(input, ec);
        if (inside(abs, dir_abs) || (!ec && inside(real, dir_real))) return input;
    }
    return std::nullopt;
}

detail::LockMode lock_mode(OutputUse use) {
    return use == OutputUse::share ? detail::LockMode::shared : detail::LockMode::exclusive;
}

std::optional<std::string> prepare_locked(const fs::path& dir, std::string_view command,
                                          const OutputOrigin& origin, OutputUse use,
                                          const std::vector<std::string>& files);

}  // namespace

void release_output_dir(const fs::path& dir) {
    detail::unlock_output_dir(dir);
}

bool is_output_dir(const fs::path& dir) {
    std::error_code ec;
    return fs::is_regular_file(dir / kOutputMarker, ec);
}

std::optional<std::string> prepare_output_dir(const fs::path& dir, std::string_view command,
                                              const OutputOrigin& origin, OutputUse use,
                                              const std::vector<std::string>& files) {
    // A refusal after the lock was taken gives it back (unless this process held it before).
    const bool held = detail::output_dir_locked(dir);
    try {
        return prepare_locked(dir, command, origin, use, files);
    } catch (...) {
        if (!held) detail::unlock_output_dir(dir);
        throw;
    }
}

namespace {

std::optional<std::string> prepare_locked(const fs::path& dir, std::string_view command,
                                          const OutputOrigin& origin, OutputUse use,
                                          const std::vector<std::string>& files) {
    const Fail fail(origin);
    if (dir.empty()) fail("the output folder is empty", "give a folder name");
    const bool replacing = use == OutputUse::replace || use == OutputUse::replace_for_peers;
    const auto lock = [&](OutputUse u) {
        detail::lock_output_dir(dir, lock_mode(u), command, [&](const std::string& why) {
            fail(why, fmt::format("wait for it to end, or pick another {}", origin.path));
        });
    };
    std::error_code ec;
    const auto st = fs::status(dir, ec);
    if (ec && ec != std::errc::no_such_file_or_directory)
        fail(fmt::format("cannot use the output folder {}: {}{}", dir.string(), ec.message(),
                         blocker(dir)));
    std::optional<std::string> notice;
    if (!fs::exists(st)) {
        fs::create_directories(dir, ec);
        if (ec || !fs::is_directory(dir))
            fail(fmt::format("cannot create the output folder {}: {}{}", dir.string(),
                             ec ? ec.message() : "it is not a folder", blocker(dir)));
        lock(use);
    } else if (!fs::is_directory(st)) {
        fail(fmt::format("the output folder {} is a file, not a folder", dir.string()),
             fmt::format("pick another {}, or remove the file", origin.path));
    } else {
        bool empty = true;
        for (const auto& e : fs::directory_iterator(dir, ec))
            if (!is_marker_file(e.path())) empty = false;
        if (ec)
            fail(fmt::format("cannot read the output folder {}: {}", dir.string(), ec.message()));
        const bool marked = is_output_dir(dir);
        if (!empty && !marked)
            fail(fmt::format("the output folder {} is not empty and holds no {} marker, so it "
                             "was not written by Gossamer",
                             dir.string(), kOutputMarker),
                 fmt::format("pick another {}, or empty the folder (Gossamer deletes nothing "
                             "it did not write)",
                             origin.path));
        if (!empty && replacing)
            if (const auto input = input_inside(dir))
                fail(fmt::format("the output folder {} holds {}, an input of this run, which "
                                 "replacing the folder would delete",
                                 dir.string(), *input),
                     fmt::format("move the input out of the folder, or pick another {}",
                                 origin.path));
        lock(use);
        if (!empty && replacing) {
            const std::string before = previous_run(dir);
            for (const auto& e : fs::directory_iterator(dir, ec)) {
                if (e.path().filename() == kOutputMarker ||
                    e.path().filename() == detail::kOutputLock)
                    continue;
                fs::remove_all(e.path(), ec);
                if (ec)
                    fail(fmt::format("cannot replace the earlier output in {}: {}: {}",
                                     dir.string(), e.path().string(), ec.message()),
                         fmt::format("remove it by hand, or pick another {}", origin.path));
            }
            notice =
                fmt::format("replacing the earlier Gossamer output in {}{}", dir.string(), before);
        }
    }
    if (replacing || !is_output_dir(dir))
        write_marker(dir, command, fail);
    else
        probe(dir, fail);
    for (const auto& name : files) {
        const fs::path p = dir / name;
        if (fs::is_directory(p, ec))
            fail(fmt::format("{} is a folder, but {} writes a file there", p.string(), command),
                 fmt::format("remove the folder, or pick another {}", origin.path));
    }
    if (use == OutputUse::replace_for_peers) lock(OutputUse::share);
    return notice;
}

}  // namespace

}  // namespace gossamer
