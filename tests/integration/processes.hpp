#pragma once
// Child processes for the tests of `gossamer peer`: start one with its stdout and stderr in
// files, wait for it with a time bound, kill it. Every wait is bounded; a child still running
// when its Process goes is killed.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace gossamer::test {

class Process {
  public:
    /// Starts `argv` (argv[0] is the program path) with stdout and stderr to `log`, and `env`
    /// added to this process's environment (a job token travels there, never in argv).
    Process(const std::vector<std::string>& argv, const std::string& log,
            const std::vector<std::pair<std::string, std::string>>& env = {})
        : log_(log) {
        pid_ = fork();
        if (pid_ == 0) {
            for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
            std::FILE* f = std::fopen(log.c_str(), "w");
            if (f) {
                dup2(fileno(f), 1);
                dup2(fileno(f), 2);
            }
            std::vector<char*> args;
            for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
            args.push_back(nullptr);
            execv(args[0], args.data());
            _exit(127);
        }
    }
    ~Process() {
        if (running()) kill(SIGKILL);
        wait(std::chrono::seconds(5));
    }
    Process(const Process&) = delete;
    Process& operator=(const Process&) = delete;

    bool running() const { return pid_ > 0 && status_ == kRunning; }
    pid_t pid() const { return pid_; }
    void kill(int sig) {
        if (pid_ > 0 && status_ == kRunning) ::kill(pid_, sig);
    }
    /// The exit status once it exited (-1 when killed by a signal), or kStillRunning after
    /// `limit`.
    int wait(std::chrono::milliseconds limit) {
        const auto end = std::chrono::steady_clock::now() + limit;
        while (status_ == kRunning && pid_ > 0) {
            int raw = 0;
            const pid_t got = waitpid(pid_, &raw, WNOHANG);
            if (got == pid_) {
                status_ = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
                break;
            }
            if (got < 0 || std::chrono::steady_clock::now() >= end) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return status_ == kRunning ? kStillRunning : status_;
    }
    /// What it wrote so far.
    std::string log() const {
        std::ifstream in(log_);
        std::stringstream ss;
        ss << in.rdbuf();
        return ss.str();
    }

    static constexpr int kStillRunning = -1000;

  private:
    static constexpr int kRunning = -2000;
    pid_t pid_ = -1;
    int status_ = kRunning;
    std::string log_;
};

/// Lines in a text (newlines counted: a one-line message gives 1).
inline int lines_of(const std::string& text) {
    int n = 0;
    for (char c : text) n += c == '\n';
    return n;
}

/// Lines in a file (0 when it does not exist yet).
inline int count_lines(const std::string& path) {
    std::ifstream in(path);
    int n = 0;
    for (std::string line; std::getline(in, line);) n += !line.empty();
    return n;
}

}  // namespace gossamer::test
