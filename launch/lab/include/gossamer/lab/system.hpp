#pragma once
/// The lab's access to the system: running `ip` and `tc`, entering a namespace, and what the
/// machine lacks for a lab.

#include <string>
#include <vector>

namespace gossamer::lab {

/// What a command printed and how it ended.
struct CommandResult {
    int status = -1;  ///< exit status; -1 when it did not exit normally or could not start
    std::string out;  ///< stdout
    std::string err;  ///< stderr
};

/// Runs argv (argv[0] looked up on PATH, then /usr/sbin and /sbin) without a shell, waiting at
/// most `timeout_s` seconds (then SIGKILL, status -1 and "timed out" in err). Safe to call in a
/// child forked from a multi-threaded process (no locks beyond malloc's).
CommandResult run_command(const std::vector<std::string>& argv, double timeout_s = 10.0);

/// Runs argv and throws Error("<argv>: <stderr>") unless it exits 0.
std::string run_checked(const std::vector<std::string>& argv, double timeout_s = 10.0);

/// Empty when this machine can hold a lab (root, `ip` and `tc` of iproute2, network namespaces
/// creatable); otherwise one line saying what is missing and how to get it.
std::string missing_requirements();

/// Moves the calling thread into network namespace `netns` (/run/netns/NAME). Throws Error.
void enter_netns(const std::string& netns);

/// The argv prefix that runs a program in network namespace `netns`: {"/usr/sbin/ip" (its
/// path), "netns", "exec", netns}. Throws Error when `ip` is missing.
std::vector<std::string> netns_exec(const std::string& netns);

/// Network namespaces that exist (`ip netns list`, names only).
std::vector<std::string> list_netns();

}  // namespace gossamer::lab
