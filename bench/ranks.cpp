#include "ranks.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <thread>

#include "gossamer/core/error.hpp"

namespace gossamer::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Reads exactly n bytes before `deadline`: false on timeout; throws on end of file.
bool read_until(int fd, void* data, std::size_t n, Clock::time_point deadline) {
    auto* p = static_cast<char*>(data);
    while (n > 0) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        pollfd pfd{fd, POLLIN, 0};
        const int ready =
            ::poll(&pfd, 1, static_cast<int>(std::max<std::int64_t>(left.count(), 0)));
        if (ready < 0 && errno == EINTR) continue;
        if (ready == 0) return false;
        const auto r = ::read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) throw Error("end of file");
        p += r;
        n -= static_cast<std::size_t>(r);
    }
    return true;
}

void write_frame(int fd, char type, const void* data, std::size_t bytes) {
    const std::uint64_t len = bytes;
    write_all(fd, &type, 1);
    write_all(fd, &len, sizeof(len));
    if (bytes > 0) write_all(fd, data, bytes);
}

// One frame before `timeout`; nullopt-like: type 0 on timeout. Throws on end of file.
Frame read_frame(int fd, std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    Frame f;
    std::uint64_t len = 0;
    if (!read_until(fd, &f.type, 1, deadline)) return {};
    if (!read_until(fd, &len, sizeof(len), deadline)) return {};
    if (len > (1u << 30)) throw Error(fmt::format("a frame of {} bytes", len));
    f.data.resize(len);
    if (!read_until(fd, f.data.data(), len, deadline)) return {};
    return f;
}

}  // namespace

void write_all(int fd, const void* data, std::size_t n) {
    const auto* p = static_cast<const char*>(data);
    while (n > 0) {
        const auto w = ::write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) throw Error("bench: the other process went away");
        p += w;
        n -= static_cast<std::size_t>(w);
    }
}

void read_all(int fd, void* data, std::size_t n) {
    auto* p = static_cast<char*>(data);
    while (n > 0) {
        const auto r = ::read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) throw Error("bench: the other process went away");
        p += r;
        n -= static_cast<std::size_t>(r);
    }
}

void pin_to_cpu(int cpu) {
    const unsigned n = std::thread::hardware_concurrency();
    if (n < 2) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(static_cast<unsigned>(cpu) % n, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

void RankChannel::send(char type, const void* data, std::size_t bytes) const {
    write_frame(out_, type, data, bytes);
}

Frame RankChannel::receive(std::chrono::milliseconds timeout) const {
    Frame f;
    try {
        f = read_frame(in_, timeout);
    } catch (const Error&) {
        throw Error(fmt::format("rank {}: the parent process went away", rank_));
    }
    if (f.type == 0)
        throw Timeout(
            fmt::format("rank {}: no word from the parent within {} ms", rank_, timeout.count()));
    return f;
}

void RankChannel::barrier(std::chrono::milliseconds timeout,
                          const std::function<void()>& idle) const {
    send('R');
    // While the others catch up, `idle` keeps this rank's transport going: a peer may still
    // wait for an acknowledgement (a UCX rendezvous completion) that only this rank can send.
    const auto deadline = Clock::now() + timeout;
    while (idle) {
        pollfd pfd{in_, POLLIN, 0};
        if (::poll(&pfd, 1, 1) > 0 || Clock::now() > deadline) break;
        idle();
    }
    const Frame f = receive(std::chrono::duration_cast<std::chrono::milliseconds>(
        std::max(deadline - Clock::now(), Clock::duration(std::chrono::milliseconds(1)))));
    if (f.type != 'G') throw Error(fmt::format("rank {}: expected a go, got '{}'", rank_, f.type));
}

ForkedRanks::ForkedRanks(int n, const std::function<void(RankChannel&)>& body) {
    // A rank that died must not take the parent with it when the parent writes to its pipe.
    ::signal(SIGPIPE, SIG_IGN);
    for (int r = 0; r < n; ++r) {
        int down[2], up[2];
        if (::pipe(down) != 0) throw Error("bench: pipe failed");
        if (::pipe(up) != 0) {
            ::close(down[0]);
            ::close(down[1]);
            throw Error("bench: pipe failed");
        }
        const pid_t pid = ::fork();
        if (pid < 0) throw Error("bench: fork failed");
        if (pid == 0) {
            // The child: close the parent's ends (its own and those of earlier ranks).
            ::close(down[1]);
            ::close(up[0]);
            for (int fd : to_) ::close(fd);
            for (int fd : from_) ::close(fd);
            RankChannel channel(r, down[0], up[1]);
            int status = 0;
            try {
                body(channel);
            } catch (const std::exception& e) {
                try {
                    channel.send('E', e.what(), std::strlen(e.what()));
                } catch (...) {
                }
                status = 1;
            }
            ::_exit(status);
        }
        ::close(down[0]);
        ::close(up[1]);
        pids_.push_back(pid);
        to_.push_back(down[1]);
        from_.push_back(up[0]);
    }
}

ForkedRanks::~ForkedRanks() {
    for (int fd : to_) ::close(fd);
    for (int fd : from_) ::close(fd);
    for (pid_t& pid : pids_) {
        if (pid <= 0) continue;
        int status = 0;
        // Closed pipes end a healthy child at its next wait; a stuck one is killed.
        for (int i = 0; i < 50 && ::waitpid(pid, &status, WNOHANG) == 0; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (::waitpid(pid, &status, WNOHANG) == 0) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
        }
        pid = -1;
    }
}

std::string ForkedRanks::killed_rank() {
    // Up to half a second for a dying child to be reaped; only deaths by a signal count.
    for (int i = 0; i < 25; ++i) {
        for (int r = 0; r < size(); ++r) {
            pid_t& pid = pids_[static_cast<std::size_t>(r)];
            int status = 0;
            if (pid <= 0 || ::waitpid(pid, &status, WNOHANG) != pid) continue;
            pid = -1;
            if (WIFSIGNALED(status))
                return fmt::format("rank {} was killed by signal {}", r, WTERMSIG(status));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return {};
}

std::string ForkedRanks::died(int rank) {
    int status = 0;
    pid_t& pid = pids_[static_cast<std::size_t>(rank)];
    // A child whose pipe closed is exiting: give it two seconds to be reaped.
    for (int i = 0; pid > 0 && i < 100; ++i) {
        if (::waitpid(pid, &status, WNOHANG) != pid) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            continue;
        }
        pid = -1;
        if (WIFSIGNALED(status)) return fmt::format("was killed by signal {}", WTERMSIG(status));
        return fmt::format("exited with status {}", WEXITSTATUS(status));
    }
    return "went away";
}

Frame ForkedRanks::receive(int rank, char expect, std::chrono::milliseconds timeout,
                           const std::string& what) {
    Frame f;
    try {
        f = read_frame(from_[static_cast<std::size_t>(rank)], timeout);
    } catch (const Error&) {
        throw Error(
            fmt::format("rank {} {} while the bench waited for {}", rank, died(rank), what));
    }
    if (f.type == 'E') {
        std::string text(reinterpret_cast<const char*>(f.data.data()), f.data.size());
        if (text.rfind("rank ", 0) != 0) text = fmt::format("rank {}: {}", rank, text);
        // A rank that reports an error often does so because another one died: name the dead
        // one first (the parent reads ranks in order, so rank 0's report comes before rank 1's
        // death is seen).
        if (const auto dead = killed_rank(); !dead.empty())
            throw Error(fmt::format("{} ({})", dead, text));
        throw Error(text);
    }
    if (f.type == 0)
        throw Timeout(
            fmt::format("rank {} sent nothing within {:.1f} s while the bench waited "
                        "for {}",
                        rank, timeout.count() / 1000.0, what));
    if (f.type != expect)
        throw Error(
            fmt::format("rank {} sent '{}' while the bench waited for {}", rank, f.type, what));
    return f;
}

void ForkedRanks::send(int rank, char type, const void* data, std::size_t bytes) {
    try {
        write_frame(to_[static_cast<std::size_t>(rank)], type, data, bytes);
    } catch (const Error&) {
        throw Error(fmt::format("rank {} {}", rank, died(rank)));
    }
}

void ForkedRanks::barrier(std::chrono::milliseconds timeout, const std::string& what) {
    for (int r = 0; r < size(); ++r) receive(r, 'R', timeout, what);
    for (int r = 0; r < size(); ++r) send(r, 'G');
}

void ForkedRanks::join(std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    for (int r = 0; r < size(); ++r) {
        pid_t& pid = pids_[static_cast<std::size_t>(r)];
        int status = 0;
        while (pid > 0 && ::waitpid(pid, &status, WNOHANG) == 0) {
            if (Clock::now() > deadline)
                throw Timeout(fmt::format("rank {} did not exit within {:.1f} s", r,
                                          timeout.count() / 1000.0));
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        if (pid > 0) {
            pid = -1;
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                throw Error(fmt::format("rank {} failed at exit (status {:#x})", r, status));
        }
    }
}

}  // namespace gossamer::bench
