// Running ip/tc without a shell, entering namespaces, and the lab's requirements (system.hpp).
#include "gossamer/lab/system.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "gossamer/core/error.hpp"

namespace gossamer::lab {
namespace {

// argv[0] as a path: PATH first, then the sbin folders a non-login root shell may lack.
std::string find_program(const std::string& name) {
    if (name.find('/') != std::string::npos) return name;
    std::string dirs = std::getenv("PATH") ? std::getenv("PATH") : "";
    dirs += ":/usr/sbin:/sbin:/usr/bin:/bin";
    std::stringstream ss(dirs);
    std::string dir;
    while (std::getline(ss, dir, ':')) {
        if (dir.empty()) continue;
        const std::string path = dir + "/" + name;
        if (::access(path.c_str(), X_OK) == 0) return path;
    }
    return {};
}

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

}  // namespace

CommandResult run_command(const std::vector<std::string>& argv, double timeout_s) {
    CommandResult r;
    if (argv.empty()) return r;
    const std::string path = find_program(argv[0]);
    if (path.empty()) {
        r.err = argv[0] + ": not found (install iproute2: scripts/deps.sh --lab)";
        return r;
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return r.err = std::strerror(errno), r;
    if (::pipe2(err, O_CLOEXEC) != 0) {
        ::close(out[0]), ::close(out[1]);
        return r.err = std::strerror(errno), r;
    }
    const pid_t pid = ::fork();
    if (pid == 0) {  // only async-signal-safe calls until exec
        ::dup2(out[1], 1);
        ::dup2(err[1], 2);
        const int null = ::open("/dev/null", O_RDONLY);
        if (null >= 0) ::dup2(null, 0);
        ::execv(path.c_str(), args.data());
        ::_exit(127);
    }
    ::close(out[1]);
    ::close(err[1]);
    if (pid < 0) {
        ::close(out[0]), ::close(err[0]);
        return r.err = std::string("fork: ") + std::strerror(errno), r;
    }
    const double deadline = now_s() + timeout_s;
    pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
    int open_fds = 2;
    bool timed_out = false;
    char buf[4096];
    while (open_fds > 0) {
        const double left = deadline - now_s();
        if (left <= 0) {
            timed_out = true;
            break;
        }
        const int ready = ::poll(fds, 2, static_cast<int>(left * 1000) + 1);
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) continue;
        for (int k = 0; k < 2; ++k) {
            if (fds[k].fd < 0 || !(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            const ssize_t got = ::read(fds[k].fd, buf, sizeof buf);
            if (got > 0) {
                (k == 0 ? r.out : r.err).append(buf, static_cast<std::size_t>(got));
            } else if (got == 0 || errno != EINTR) {
                ::close(fds[k].fd);
                fds[k].fd = -1;
                --open_fds;
            }
        }
    }
    for (auto& f : fds)
        if (f.fd >= 0) ::close(f.fd);
    if (timed_out) ::kill(pid, SIGKILL);
    int raw = 0;
    while (::waitpid(pid, &raw, 0) < 0 && errno == EINTR) {
    }
    if (timed_out) {
        r.status = -1;
        r.err += fmt::format("timed out after {} s", timeout_s);
    } else {
        r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    }
    return r;
}

std::string run_checked(const std::vector<std::string>& argv, double timeout_s) {
    auto r = run_command(argv, timeout_s);
    if (r.status == 0) return r.out;
    std::string cmd;
    for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
    while (!r.err.empty() && (r.err.back() == '\n' || r.err.back() == ' ')) r.err.pop_back();
    for (auto& c : r.err)
        if (c == '\n') c = ' ';
    throw Error(fmt::format("'{}' failed: {}", cmd,
                            r.err.empty() ? fmt::format("exit status {}", r.status) : r.err));
}

std::string missing_requirements() {
    if (::geteuid() != 0)
        return "the lab needs root (network namespaces, veths and qdiscs): run as root";
    for (const char* program : {"ip", "tc"})
        if (find_program(program).empty())
            return fmt::format(
                "'{}' (iproute2) is not installed: scripts/deps.sh --lab installs it", program);
    // Can this process make a network namespace at all (a container may forbid it)?
    const pid_t pid = ::fork();
    if (pid == 0) ::_exit(::unshare(CLONE_NEWNET) == 0 ? 0 : 1);
    if (pid < 0) return std::string("fork failed: ") + std::strerror(errno);
    int raw = 0;
    while (::waitpid(pid, &raw, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(raw) || WEXITSTATUS(raw) != 0)
        return "network namespaces cannot be created here (unshare(CLONE_NEWNET) failed; a "
               "container without CAP_SYS_ADMIN?)";
    const auto version = run_command({"ip", "-V"}, 5.0);
    if (version.status != 0) return "'ip -V' failed: " + version.err;
    return {};
}

void enter_netns(const std::string& netns) {
    const std::string path = "/run/netns/" + netns;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        throw Error(
            fmt::format("cannot open network namespace {}: {}", path, std::strerror(errno)));
    const int rc = ::setns(fd, CLONE_NEWNET);
    const int saved = errno;
    ::close(fd);
    if (rc != 0)
        throw Error(
            fmt::format("cannot enter network namespace {}: {}", netns, std::strerror(saved)));
}

std::vector<std::string> netns_exec(const std::string& netns) {
    const auto ip = find_program("ip");
    if (ip.empty())
        throw Error("'ip' (iproute2) is not installed: scripts/deps.sh --lab installs it");
    return {ip, "netns", "exec", netns};
}

std::vector<std::string> list_netns() {
    std::vector<std::string> names;
    const auto r = run_command({"ip", "netns", "list"}, 10.0);
    if (r.status != 0) return names;
    std::stringstream ss(r.out);
    std::string line;
    while (std::getline(ss, line)) {
        const auto space = line.find(' ');  // "name (id: 3)"
        if (!line.empty()) names.push_back(line.substr(0, space));
    }
    return names;
}

}  // namespace gossamer::lab
