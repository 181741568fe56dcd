#pragma once
// Slot locks and teardown shared by Lab, lab clean and lab down (not installed).

#include <string>

namespace gossamer::lab::detail {

/// Path of slot `slot`'s lock file and of its holder's pid file in kStateDir.
std::string lock_path(int slot);
std::string pid_path(int slot);

/// Opens slot `slot`'s lock file (created if needed; O_CLOEXEC) and tries to lock it without
/// waiting. Returns the fd when locked, -1 when another process holds it. Throws Error when the
/// state folder cannot be written.
int try_lock_slot(int slot);

/// Takes the first free slot; returns its locked fd and sets `slot`. Throws Error if none.
int lock_free_slot(int& slot);

/// Removes every namespace of slot `slot` (peers first, then the lab's; their veths and qdiscs
/// go with them). Returns how many; failures are written to stderr, never thrown (it also runs
/// in the holder). Safe after fork in a multi-threaded process.
int teardown(int slot);

/// Writes `value` to the sysctl `path` (under /proc/sys) inside network namespace `netns`.
void write_sysctl_in(const std::string& netns, const std::string& path, const std::string& value);

}  // namespace gossamer::lab::detail
