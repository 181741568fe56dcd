#pragma once
/// A running lab: one network namespace per peer, each joined by a veth pair to a bridge in the
/// lab's own namespace, addresses from the job's private /24, links shaped by the kernel.
///
/// Everything is named after the job (spec.hpp) and held by a **holder**: a child process forked
/// by Lab::create that removes the job's namespaces (and with them every veth and qdisc) when
/// the Lab is stopped, when its owner exits or is killed (SIGKILL included: the holder sees its
/// pipe close), or on SIGTERM (`gossamer lab down`). The job's /24 is a lock file in kStateDir
/// that the holder keeps locked while it lives, so parallel jobs never share a /24, and
/// leftovers of a dead holder are found by the free lock (`gossamer lab clean`).

#include <sys/types.h>

#include <string>
#include <vector>

#include "gossamer/lab/spec.hpp"

namespace gossamer::lab {

/// Where the slot locks and holder pids live.
inline constexpr const char* kStateDir = "/run/gossamer-lab";

/// One peer's place in the lab.
struct PeerHost {
    std::string netns;    ///< its network namespace ("gsm7-p3"): `ip netns exec NETNS ...`
    std::string device;   ///< its veth end in there ("gsm7p3"): UCX_NET_DEVICES
    std::string address;  ///< its IPv4 address ("10.213.7.4"): --address
};

class Lab {
  public:
    /// Takes a free slot, forks the holder, builds the lab of `spec` (validated first) and
    /// returns once it carries traffic. Throws ConfigError for a bad spec, Error when the
    /// machine cannot (missing_requirements()), no slot is free or a command fails; nothing of
    /// the job is left behind then.
    static Lab create(const LabSpec& spec);

    Lab(Lab&& other) noexcept;
    Lab& operator=(Lab&& other) noexcept;
    Lab(const Lab&) = delete;
    Lab& operator=(const Lab&) = delete;
    /// stop().
    ~Lab();

    /// Tells the holder to remove the job and waits for it (at most `timeout_s`; after that the
    /// holder is killed and `gossamer lab clean` removes what is left). Idempotent.
    void stop(double timeout_s = 30.0);
    /// Whether the holder is still alive (it ends early only when killed from outside).
    bool holder_alive();

    int slot() const { return slot_; }
    std::string job() const { return job_name(slot_); }
    const LabSpec& spec() const { return spec_; }
    const std::vector<PeerHost>& hosts() const { return hosts_; }
    pid_t holder_pid() const { return holder_; }

  private:
    Lab() = default;
    int slot_ = -1;
    LabSpec spec_;
    std::vector<PeerHost> hosts_;
    pid_t holder_ = -1;
    int control_fd_ = -1;  ///< write end of the holder's pipe: closing it ends the job
};

/// What clean_leftovers() and take_down() found.
struct CleanReport {
    std::vector<std::string> removed;  ///< namespaces removed
    std::vector<std::string> live;     ///< jobs left alone because their holder is alive
};

/// Removes every namespace named with kPrefix whose job's holder is dead (its slot lock is
/// free); jobs with a live holder are listed and left alone.
CleanReport clean_leftovers();

/// Ends job `slot`: SIGTERM to its live holder, then waits (at most `timeout_s`) for the lock
/// to come free, then removes whatever is left. Throws Error when the holder does not let go.
CleanReport take_down(int slot, double timeout_s = 15.0);

/// Namespaces of slot `slot` that exist now (the lab's and its peers').
std::vector<std::string> job_netns(int slot);

}  // namespace gossamer::lab
