// Building a lab and its holder process (lab.hpp).
#include "gossamer/lab/lab.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <thread>
#include <utility>

#include "gossamer/core/error.hpp"
#include "gossamer/lab/shaping.hpp"
#include "gossamer/lab/system.hpp"
#include "slots.hpp"

namespace gossamer::lab {
namespace {

volatile std::sig_atomic_t g_holder_stop = 0;
extern "C" void on_holder_signal(int) {
    g_holder_stop = 1;
}

// The holder: waits until its owner closes the pipe (stop(), exit, or any death of the owner,
// SIGKILL included), SIGTERM arrives, or it is orphaned; then removes the job and exits,
// releasing the slot lock. Its own process group keeps a terminal's Ctrl-C away from it: the
// owner decides. Runs after fork(): no locks beyond malloc's (glibc makes that safe).
[[noreturn]] void holder_main(int slot, int control_fd, int lock_fd, pid_t owner) {
    ::setpgid(0, 0);
    struct sigaction sa {};
    sa.sa_handler = on_holder_signal;
    ::sigaction(SIGTERM, &sa, nullptr);
    ::signal(SIGINT, SIG_IGN);
    ::signal(SIGHUP, SIG_IGN);
    ::signal(SIGPIPE, SIG_IGN);
    sigset_t all;
    sigemptyset(&all);
    ::sigprocmask(SIG_SETMASK, &all, nullptr);
    // Keep only the pipe, the lock and stderr: a copy of the owner's stdout or sockets would
    // keep whoever reads them waiting.
    const int null = ::open("/dev/null", O_RDWR);
    if (null >= 0) ::dup2(null, 0), ::dup2(null, 1);
    // Both first moved above 4: the owner's lock fd is often 3 and the pipe's 4 (the first
    // free numbers in `gossamer lab up`), and dup2(pipe, 3) would then close the lock before
    // it is kept, leaving the slot unlocked while the lab lives, free for the next job to
    // take and to tear this lab down as a dead holder's leftovers.
    const int control = ::fcntl(control_fd, F_DUPFD, 5);
    const int lock = ::fcntl(lock_fd, F_DUPFD, 5);
    if (control < 0 || lock < 0) ::_exit(3);  // the owner's create() then fails: no lock
    ::dup2(control, 3);
    ::dup2(lock, 4);
    ::close_range(5, ~0U, 0);
    while (!g_holder_stop) {
        pollfd p{3, POLLIN, 0};
        const int ready = ::poll(&p, 1, 1000);
        if (ready > 0) break;  // EOF (or anything written): the owner is done
        if (::getppid() != owner) break;
    }
    detail::teardown(slot);
    ::_exit(0);
}

void run_all(const std::vector<std::vector<std::string>>& cmds) {
    for (const auto& c : cmds) run_checked(c);
}

}  // namespace

Lab Lab::create(const LabSpec& spec) {
    validate(spec, "lab");
    if (const auto missing = missing_requirements(); !missing.empty()) throw Error(missing);
    Lab lab;
    lab.spec_ = spec;
    int slot = -1;
    const int lock_fd = detail::lock_free_slot(slot);
    lab.slot_ = slot;
    detail::teardown(slot);  // leftovers of a dead holder of this slot, if any
    int control[2];
    if (::pipe2(control, O_CLOEXEC) != 0) {
        ::close(lock_fd);
        throw Error(fmt::format("pipe: {}", std::strerror(errno)));
    }
    const pid_t owner = ::getpid();
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::close(control[1]);
        holder_main(slot, control[0], lock_fd, owner);
    }
    ::close(control[0]);
    ::close(lock_fd);  // the holder's copy keeps the slot locked for as long as it lives
    if (pid < 0) {
        ::close(control[1]);
        throw Error(fmt::format("fork: {}", std::strerror(errno)));
    }
    lab.holder_ = pid;
    lab.control_fd_ = control[1];
    std::ofstream(detail::pid_path(slot)) << pid << '\n';

    const int n = static_cast<int>(spec.peers.size());
    try {
        const auto lab_ns = lab_netns(slot), br = bridge_device(slot);
        std::vector<std::string> all_ns{lab_ns};
        for (int i = 0; i < n; ++i) all_ns.push_back(peer_netns(slot, i));
        for (const auto& ns : all_ns) {
            run_checked({"ip", "netns", "add", ns});
            // No IPv6: its router and neighbour chatter would cross the qdiscs uncounted by
            // the peers.
            detail::write_sysctl_in(ns, "net/ipv6/conf/all/disable_ipv6", "1");
            detail::write_sysctl_in(ns, "net/ipv6/conf/default/disable_ipv6", "1");
            run_checked({"ip", "-n", ns, "link", "set", "lo", "up"});
        }
        run_checked({"ip", "-n", lab_ns, "link", "add", br, "type", "bridge"});
        run_checked({"ip", "-n", lab_ns, "link", "set", br, "up"});
        for (int i = 0; i < n; ++i) {
            const auto ns = peer_netns(slot, i), dev = peer_device(slot, i),
                       port = bridge_port(slot, i), addr = peer_address(slot, i);
            run_checked({"ip", "-n", lab_ns, "link", "add", port, "type", "veth", "peer", "name",
                         dev, "netns", ns});
            run_checked({"ip", "-n", lab_ns, "link", "set", port, "master", br, "up"});
            run_checked({"ip", "-n", ns, "addr", "add", addr + "/24", "dev", dev});
            run_checked({"ip", "-n", ns, "link", "set", dev, "up"});
            run_all(shaping_commands(spec, slot, i));
            lab.hosts_.push_back({ns, dev, addr});
        }
    } catch (...) {
        lab.stop();
        throw;
    }
    return lab;
}

Lab::Lab(Lab&& other) noexcept
    : slot_(other.slot_),
      spec_(std::move(other.spec_)),
      hosts_(std::move(other.hosts_)),
      holder_(std::exchange(other.holder_, -1)),
      control_fd_(std::exchange(other.control_fd_, -1)) {}

Lab& Lab::operator=(Lab&& other) noexcept {
    if (this != &other) {
        stop();
        slot_ = other.slot_;
        spec_ = std::move(other.spec_);
        hosts_ = std::move(other.hosts_);
        holder_ = std::exchange(other.holder_, -1);
        control_fd_ = std::exchange(other.control_fd_, -1);
    }
    return *this;
}

Lab::~Lab() {
    stop();
}

void Lab::stop(double timeout_s) {
    if (control_fd_ >= 0) ::close(std::exchange(control_fd_, -1));
    if (holder_ < 0) return;
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    int raw = 0;
    while (true) {
        const pid_t r = ::waitpid(holder_, &raw, WNOHANG);
        if (r == holder_ || (r < 0 && errno != EINTR)) break;
        if (std::chrono::steady_clock::now() >= deadline) {
            ::kill(holder_, SIGKILL);  // `gossamer lab clean` removes what it left
            while (::waitpid(holder_, &raw, 0) < 0 && errno == EINTR) {
            }
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    holder_ = -1;
}

bool Lab::holder_alive() {
    if (holder_ < 0) return false;
    int raw = 0;
    const pid_t r = ::waitpid(holder_, &raw, WNOHANG);
    if (r == holder_) {
        holder_ = -1;
        return false;
    }
    return r == 0;
}

}  // namespace gossamer::lab
