#include "output_lock.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>

namespace gossamer::detail {
namespace {

namespace fs = std::filesystem;

struct Held {
    int fd = -1;
    LockMode mode = LockMode::exclusive;
};

// The locks this process holds, by canonical folder. A second flock on another descriptor of
// the same file would conflict with this process's own lock, so each folder has one descriptor.
std::mutex& held_mutex() {
    static std::mutex m;
    return m;
}
std::map<std::string, Held>& held() {
    static std::map<std::string, Held> m;
    return m;
}

std::string key_of(const fs::path& dir) {
    std::error_code ec;
    auto canonical = fs::weakly_canonical(dir, ec);
    return (ec ? fs::absolute(dir, ec) : canonical).lexically_normal().string();
}

int op_of(LockMode mode) {
    return (mode == LockMode::exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB;
}

// Who holds the lock, for the refusal: the exclusive holder writes its line into the file;
// shared holders (the peers of a job) write nothing, so they are named as such.
std::string holder(int fd, const fs::path& dir) {
    if (::flock(fd, LOCK_SH | LOCK_NB) == 0) {
        ::flock(fd, LOCK_UN);
        return fmt::format("the running peers of a job (gossamer peer writing into {})",
                           dir.string());
    }
    char buf[256] = {};
    const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    std::string text(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
    if (const auto end = text.find_first_of("\r\n"); end != std::string::npos) text.resize(end);
    for (char& c : text)
        if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    return text.empty() ? std::string("another Gossamer run") : text;
}

}  // namespace

std::string now_utc() {
    const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

void lock_output_dir(const fs::path& dir, LockMode mode, std::string_view command,
                     const std::function<void(const std::string&)>& refuse) {
    const std::string key = key_of(dir);
    std::lock_guard guard(held_mutex());
    auto it = held().find(key);
    const fs::path file = dir / kOutputLock;
    int fd = -1;
    if (it != held().end()) {
        fd = it->second.fd;
        if (it->second.mode == mode) return;
    } else {
        fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
            refuse(fmt::format("cannot create the lock file {}: {}", file.string(),
                               std::strerror(errno)));
    }
    if (::flock(fd, op_of(mode)) != 0) {
        const int err = errno;
        std::string who;
        if (it == held().end()) {
            if (err == EWOULDBLOCK) who = holder(fd, dir);
            ::close(fd);
        } else {
            // A failed conversion may have dropped this process's own lock: take it back.
            who = "the running peers of a job (gossamer peer)";
            ::flock(fd, op_of(it->second.mode));
        }
        if (err != EWOULDBLOCK)
            refuse(fmt::format("cannot lock {}: {}", file.string(), std::strerror(err)));
        refuse(fmt::format("the output folder {} is in use by {}", dir.string(), who));
    }
    if (mode == LockMode::exclusive) {
        const std::string line = fmt::format("{} (pid {}, since {})\n", command,
                                             static_cast<long>(::getpid()), now_utc());
        // Best effort: the line only names the holder in another run's refusal.
        if (::ftruncate(fd, 0) == 0) {
            [[maybe_unused]] const auto wrote = ::pwrite(fd, line.data(), line.size(), 0);
        }
    }
    held()[key] = {fd, mode};
}

bool output_dir_locked(const fs::path& dir) {
    std::lock_guard guard(held_mutex());
    return held().count(key_of(dir)) > 0;
}

void unlock_output_dir(const fs::path& dir) {
    std::lock_guard guard(held_mutex());
    auto it = held().find(key_of(dir));
    if (it == held().end()) return;
    ::close(it->second.fd);
    held().erase(it);
}

}  // namespace gossamer::detail
