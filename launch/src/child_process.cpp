#include "gossamer/launch/child_process.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <thread>

#include "gossamer/core/error.hpp"

extern char** environ;

namespace gossamer::launch {

std::string signal_name(int signal) {
    const char* abbrev = sigabbrev_np(signal);
    return abbrev ? fmt::format("SIG{}", abbrev) : fmt::format("signal {}", signal);
}

std::string describe(const ExitStatus& s) {
    if (s.signal != 0) return "killed by " + signal_name(s.signal);
    return fmt::format("exit status {}", s.code);
}

namespace {

ExitStatus decode(int raw) {
    ExitStatus s;
    if (WIFEXITED(raw)) s.code = WEXITSTATUS(raw);
    if (WIFSIGNALED(raw)) s.signal = WTERMSIG(raw);
    return s;
}

}  // namespace

int Children::start(const std::vector<std::string>& argv,
                    const std::vector<std::pair<std::string, std::string>>& env,
                    const std::filesystem::path& log) {
    if (argv.empty()) throw Error("Children::start: empty command");
    // Everything the child touches is prepared before fork: between fork and exec only
    // async-signal-safe calls are allowed (this process has threads).
    std::map<std::string, std::string> vars;
    for (char** e = environ; e && *e; ++e) {
        const std::string kv(*e);
        const auto eq = kv.find('=');
        if (eq != std::string::npos) vars[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    for (const auto& [k, v] : env) vars[k] = v;
    std::vector<std::string> env_strings;
    for (const auto& [k, v] : vars) env_strings.push_back(k + "=" + v);
    std::vector<char*> envp, args;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> argv_copy = argv;
    for (auto& s : argv_copy) args.push_back(s.data());
    args.push_back(nullptr);

    const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0)
        throw Error(fmt::format("cannot write {}: {}", log.string(), std::strerror(errno)));
    const int in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) {
        const int err = errno;
        ::close(out);
        if (in >= 0) ::close(in);
        throw Error(fmt::format("cannot start {}: fork: {}", argv[0], std::strerror(err)));
    }
    if (pid == 0) {
        ::setpgid(0, 0);  // its own group: a terminal's Ctrl-C reaches the launcher only
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(127);  // the launcher died before prctl
        sigset_t none;
        sigemptyset(&none);
        ::sigprocmask(SIG_SETMASK, &none, nullptr);
        if (in >= 0) ::dup2(in, STDIN_FILENO);
        ::dup2(out, STDOUT_FILENO);
        ::dup2(out, STDERR_FILENO);
        ::execve(args[0], args.data(), envp.data());
        static const char msg[] = "gossamer launch: cannot execute the peer program\n";
        [[maybe_unused]] auto w = ::write(STDERR_FILENO, msg, sizeof msg - 1);
        ::_exit(127);
    }
    ::setpgid(pid, pid);  // also here, so kill(-pid) works before the child ran
    ::close(out);
    if (in >= 0) ::close(in);
    children_.push_back({pid, std::nullopt});
    return static_cast<int>(children_.size()) - 1;
}

void Children::poll() {
    for (auto& c : children_) {
        if (c.status) continue;
        int raw = 0;
        const pid_t r = ::waitpid(c.pid, &raw, WNOHANG);
        if (r == c.pid) c.status = decode(raw);
        if (r < 0 && errno == ECHILD) c.status = ExitStatus{};  // reaped elsewhere: unknown
    }
}

std::vector<int> Children::running() const {
    std::vector<int> r;
    for (std::size_t i = 0; i < children_.size(); ++i)
        if (!children_[i].status) r.push_back(static_cast<int>(i));
    return r;
}

void Children::kill_all(double grace) {
    poll();
    if (running().empty()) return;
    using clock = std::chrono::steady_clock;
    const auto wait_until = [&](clock::time_point deadline) {
        while (!running().empty() && clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            poll();
        }
    };
    for (int i : running()) ::kill(-children_[i].pid, SIGTERM);
    wait_until(clock::now() +
               std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(grace)));
    for (int i : running()) ::kill(-children_[i].pid, SIGKILL);
    wait_until(clock::now() + std::chrono::seconds(1));
}

std::vector<std::string> last_lines(const std::filesystem::path& path, int n) {
    std::ifstream in(path);
    std::deque<std::string> lines;
    std::string line;
    while (std::getline(in, line)) {
        lines.push_back(std::move(line));
        if (static_cast<int>(lines.size()) > n) lines.pop_front();
    }
    return {lines.begin(), lines.end()};
}

namespace {
volatile std::sig_atomic_t g_interrupt = 0;
extern "C" void on_interrupt(int sig) {
    g_interrupt = sig;
}
}  // namespace

InterruptGuard::InterruptGuard() {
    g_interrupt = 0;
    struct sigaction sa {};
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGINT, &sa, &old_int_);
    ::sigaction(SIGTERM, &sa, &old_term_);
}

InterruptGuard::~InterruptGuard() {
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
}

int InterruptGuard::received() {
    return g_interrupt;
}

}  // namespace gossamer::launch
