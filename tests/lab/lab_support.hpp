#pragma once
// Helpers of the lab tests: the netns component, and `gossamer lab up` as a child whose
// stdout is read line by line with a deadline.

#include <doctest/doctest.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gossamer/lab/lab.hpp"
#include "gossamer/lab/system.hpp"
#include "support/optional.hpp"

namespace gossamer::test {

/// Whether the lab can run here (root, ip, tc, namespaces); otherwise the case skips.
inline bool have_netns() {
    return have_component("netns", lab::missing_requirements());
}

/// Whether `pred` becomes true within `seconds` (polled every 50 ms).
template <typename P>
bool eventually(P pred, double seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
        if (pred()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return pred();
}

/// Whether the host namespace shows any link of slot `slot` (there should never be one).
inline bool host_has_links(int slot) {
    const auto r = lab::run_command({"ip", "-o", "link", "show"});
    return r.out.find(": " + lab::job_name(slot) + "p") != std::string::npos ||
           r.out.find(": " + lab::job_name(slot) + "b") != std::string::npos;
}

/// A child process (argv, no shell) whose stdout this test reads; SIGKILLed and reaped at the
/// end of the scope if still running.
class Child {
  public:
    explicit Child(const std::vector<std::string>& argv) {
        int fds[2];
        REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
        std::vector<char*> args;
        for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        pid_ = ::fork();
        REQUIRE(pid_ >= 0);
        if (pid_ == 0) {
            ::dup2(fds[1], 1);
            ::execv(args[0], args.data());
            ::_exit(127);
        }
        ::close(fds[1]);
        out_ = fds[0];
    }
    ~Child() {
        if (pid_ > 0 && !status_) {
            ::kill(pid_, SIGKILL);
            wait(10.0);
        }
        ::close(out_);
    }
    pid_t pid() const { return pid_; }

    /// The first line of stdout containing `part` (lines before it are kept in seen()), or ""
    /// if none came within `seconds`.
    std::string line_with(const std::string& part, double seconds) {
        const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
        while (true) {
            for (auto nl = buf_.find('\n'); nl != std::string::npos; nl = buf_.find('\n')) {
                std::string line = buf_.substr(0, nl);
                buf_.erase(0, nl + 1);
                seen_ += line + "\n";
                if (line.find(part) != std::string::npos) return line;
            }
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                end - std::chrono::steady_clock::now());
            if (left.count() <= 0) return {};
            pollfd p{out_, POLLIN, 0};
            if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
            char chunk[4096];
            const ssize_t got = ::read(out_, chunk, sizeof chunk);
            if (got <= 0) return {};
            buf_.append(chunk, static_cast<std::size_t>(got));
        }
    }
    const std::string& seen() const { return seen_; }

    /// Waits up to `seconds` for the child to end; its exit code, or -1 (killed, or still
    /// running).
    int wait(double seconds) {
        const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
        while (!status_) {
            int raw = 0;
            if (::waitpid(pid_, &raw, WNOHANG) == pid_) {
                status_ = true;
                code_ = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
                break;
            }
            if (std::chrono::steady_clock::now() >= end) return -1;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return code_;
    }

  private:
    pid_t pid_ = -1;
    int out_ = -1;
    std::string buf_, seen_;
    bool status_ = false;
    int code_ = -1;
};

/// The slot of a "lab gsmS: ..." line printed by `gossamer lab up` (-1 if none).
inline int slot_of_up_line(const std::string& line) {
    const auto at = line.find("lab gsm");
    if (at == std::string::npos) return -1;
    const auto colon = line.find(':', at);
    const auto slot = lab::parse_job(line.substr(at + 4, colon - at - 4));
    return slot ? *slot : -1;
}

}  // namespace gossamer::test
