#include "gossamer/core/file_io.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <utility>

#include "gossamer/core/error.hpp"
#include "gossamer/core/units.hpp"

namespace gossamer {
namespace {

std::mutex& inputs_mutex() {
    static std::mutex m;
    return m;
}

std::vector<std::string>& inputs() {
    static std::vector<std::string> v;
    return v;
}

std::string kind_of(mode_t mode) {
    if (S_ISDIR(mode)) return "a folder";
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

class Fd {
  public:
    explicit Fd(int fd) : fd_(fd) {}
    Fd(Fd&& other) noexcept : fd_(other.release()) {}
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    Fd& operator=(Fd&&) = delete;
    ~Fd() {
        if (fd_ >= 0) ::close(fd_);
    }
    int get() const { return fd_; }
    int release() { return std::exchange(fd_, -1); }

  private:
    int fd_;
};

[[noreturn]] void too_big(const std::string& path, const InputKind& kind, std::uint64_t size) {
    throw ConfigError(path, "",
                      fmt::format("the file is {}, more than the {} bound on {}",
                                  format_bytes(static_cast<double>(size)),
                                  format_bytes(static_cast<double>(kind.limit)), kind.group),
                      "give a smaller file (docs/operations/errors.md, \"Files\")");
}

// Opens `path` for reading as an input of `kind` and checks it: a regular file within the bound.
// O_NONBLOCK: opening a FIFO must not wait for a writer; the type is checked before any read.
Fd open_input(const std::string& path, const InputKind& kind, std::uint64_t& size) {
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
    if (fd.get() < 0)
        throw ConfigError(path, "",
                          fmt::format("cannot open {}: {}", kind.noun, std::strerror(errno)),
                          "check the path and its permissions");
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0)
        throw ConfigError(path, "",
                          fmt::format("cannot read {}: {}", kind.noun, std::strerror(errno)),
                          "check the path and its permissions");
    if (!S_ISREG(st.st_mode))
        throw ConfigError(path, "", fmt::format("is {}, not a regular file", kind_of(st.st_mode)),
                          S_ISDIR(st.st_mode)
                              ? std::string("give the path of the file inside it")
                              : fmt::format("give a regular file (no FIFO, device or socket is "
                                            "read as one of the {})",
                                            kind.group));
    size = static_cast<std::uint64_t>(st.st_size);
    if (size > kind.limit) too_big(path, kind, size);
    note_input_file(path);
    return fd;
}

}  // namespace

void check_input_file(const std::string& path, const InputKind& kind) {
    std::uint64_t size = 0;
    open_input(path, kind, size);
}

std::string read_input_file(const std::string& path, const InputKind& kind) {
    std::uint64_t size = 0;
    Fd fd = open_input(path, kind, size);
    // Read to the end, but never past the bound: the file may grow while it is read.
    std::string bytes(static_cast<std::size_t>(size), '\0');
    std::size_t got = 0;
    for (;;) {
        if (got == bytes.size()) {
            if (bytes.size() > kind.limit) too_big(path, kind, bytes.size());
            bytes.resize(bytes.size() + 4096);
        }
        const ssize_t n = ::read(fd.get(), bytes.data() + got, bytes.size() - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0)
            throw ConfigError(path, "",
                              fmt::format("cannot read {}: {}", kind.noun, std::strerror(errno)),
                              "check the file");
        if (n == 0) break;
        got += static_cast<std::size_t>(n);
    }
    bytes.resize(got);
    if (got > kind.limit) too_big(path, kind, got);
    return bytes;
}

void note_input_file(const std::string& path) {
    std::lock_guard lock(inputs_mutex());
    for (const auto& p : inputs())
        if (p == path) return;
    inputs().push_back(path);
}

std::vector<std::string> input_files() {
    std::lock_guard lock(inputs_mutex());
    return inputs();
}

void forget_input_files() {
    std::lock_guard lock(inputs_mutex());
    inputs().clear();
}

void write_file_atomically(const std::string& path, std::string_view bytes, const char* what) {
    const std::string tmp = path + ".tmp";
    const auto fail = [&](const char* step, int err) {
        ::unlink(tmp.c_str());
        throw IoError(
            fmt::format("{}: cannot {} the {}: {}", path, step, what, std::strerror(err)));
    };
    const int raw = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (raw < 0) {
        const int e = errno;
        throw IoError(fmt::format("{}: cannot create the {}: {}", path, what, std::strerror(e)));
    }
    {
        Fd fd(raw);
        const char* p = bytes.data();
        std::size_t left = bytes.size();
        while (left > 0) {
            const ssize_t n = ::write(fd.get(), p, left);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) fail("write", n < 0 ? errno : ENOSPC);
            p += n;
            left -= static_cast<std::size_t>(n);
        }
        if (::fsync(fd.get()) != 0) fail("flush", errno);
        if (::close(fd.release()) != 0) fail("flush", errno);
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) fail("rename", errno);
}

}  // namespace gossamer
