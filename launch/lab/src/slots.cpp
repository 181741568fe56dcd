// Slot locks, teardown, lab clean and lab down (lab.hpp).
#include "slots.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>

#include "gossamer/core/error.hpp"
#include "gossamer/lab/lab.hpp"
#include "gossamer/lab/system.hpp"

namespace gossamer::lab {
namespace detail {

std::string lock_path(int slot) {
    return fmt::format("{}/{}.lock", kStateDir, job_name(slot));
}
std::string pid_path(int slot) {
    return fmt::format("{}/{}.pid", kStateDir, job_name(slot));
}

int try_lock_slot(int slot) {
    if (::mkdir(kStateDir, 0700) != 0 && errno != EEXIST)
        throw Error(fmt::format("cannot create {}: {}", kStateDir, std::strerror(errno)));
    const auto path = lock_path(slot);
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) throw Error(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
    ::close(fd);
    return -1;
}

int lock_free_slot(int& slot) {
    // Slots with leftovers of a dead holder last: `gossamer lab clean` may be about to report
    // them, and a fresh slot is as good.
    std::vector<bool> leftovers(kSlots, false);
    for (const auto& n : list_netns())
        if (const auto s = slot_of_netns(n)) leftovers[static_cast<std::size_t>(*s)] = true;
    for (const bool reclaim : {false, true})
        for (int s = 0; s < kSlots; ++s) {
            if (leftovers[static_cast<std::size_t>(s)] != reclaim) continue;
            const int fd = try_lock_slot(s);
            if (fd >= 0) {
                slot = s;
                return fd;
            }
        }
    throw Error(
        fmt::format("all {} lab slots are taken (live holders); end a lab with "
                    "'gossamer lab down JOB'",
                    kSlots));
}

int teardown(int slot) {
    auto names = job_netns(slot);
    // Peers first: deleting a peer's namespace removes its veth pair from the bridge.
    std::stable_partition(names.begin(), names.end(),
                          [slot](const std::string& n) { return n != lab_netns(slot); });
    int removed = 0;
    for (const auto& n : names) {
        const auto r = run_command({"ip", "netns", "delete", n}, 10.0);
        if (r.status == 0) {
            ++removed;
        } else {
            const std::string line = fmt::format("gossamer lab: could not remove namespace {}: {}",
                                                 n, r.err.empty() ? "\n" : r.err);
            if (::write(2, line.data(), line.size()) < 0) {
            }
        }
    }
    ::unlink(pid_path(slot).c_str());
    return removed;
}

void write_sysctl_in(const std::string& netns, const std::string& path, const std::string& value) {
    std::string error;
    // A thread of its own: entering a namespace changes only the calling thread.
    std::thread t([&] {
        try {
            enter_netns(netns);
            std::ofstream f("/proc/sys/" + path);
            if (!(f << value << '\n') || !f.flush())
                error = fmt::format("cannot write /proc/sys/{} in {}", path, netns);
        } catch (const std::exception& e) {
            error = e.what();
        }
    });
    t.join();
    if (!error.empty()) throw Error(error);
}

}  // namespace detail

std::vector<std::string> job_netns(int slot) {
    std::vector<std::string> out;
    for (const auto& n : list_netns())
        if (slot_of_netns(n) == slot) out.push_back(n);
    return out;
}

CleanReport clean_leftovers() {
    CleanReport report;
    std::vector<int> slots;
    for (const auto& n : list_netns())
        if (auto s = slot_of_netns(n);
            s && std::find(slots.begin(), slots.end(), *s) == slots.end())
            slots.push_back(*s);
    std::sort(slots.begin(), slots.end());
    for (const int s : slots) {
        const int fd = detail::try_lock_slot(s);
        if (fd < 0) {
            report.live.push_back(job_name(s));
            continue;
        }
        const auto names = job_netns(s);
        detail::teardown(s);
        ::close(fd);
        for (const auto& n : names)
            if (std::find(report.removed.begin(), report.removed.end(), n) == report.removed.end())
                report.removed.push_back(n);
    }
    return report;
}

CleanReport take_down(int slot, double timeout_s) {
    CleanReport report;
    report.removed = job_netns(slot);  // removed by the holder, or below
    int fd = detail::try_lock_slot(slot);
    if (fd < 0) {
        pid_t pid = -1;
        std::ifstream(detail::pid_path(slot)) >> pid;
        if (pid > 0) ::kill(pid, SIGTERM);
        const auto deadline =
            std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
        while (fd < 0 && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            fd = detail::try_lock_slot(slot);
        }
        if (fd < 0)
            throw Error(
                fmt::format("the holder of {} (pid {}) did not end within {} s of SIGTERM; "
                            "kill it, then run 'gossamer lab clean'",
                            job_name(slot), pid, timeout_s));
    }
    detail::teardown(slot);  // whatever the holder left
    ::close(fd);
    return report;
}

}  // namespace gossamer::lab
