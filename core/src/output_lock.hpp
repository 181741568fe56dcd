#pragma once
// The lock of an output folder (docs/operations/cli.md, "Output folders"): a flock on
// OUT/.gossamer-output.lock, exclusive for a command that owns the folder (train, sim, launch),
// shared for the peers of one job. Held until the process ends; the kernel releases it however
// the process ends (kill -9 included). Private to core (output_dir.cpp).

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

namespace gossamer::detail {

/// The lock file's name, inside the folder.
inline constexpr std::string_view kOutputLock = ".gossamer-output.lock";

enum class LockMode { exclusive, shared };

/// Takes (or converts, when this process holds it already) the lock of the existing folder
/// `dir` without waiting. When another process holds it, calls `refuse` with a line naming
/// the holder ("in use by gossamer train (pid 123, since ...)") and does not return.
void lock_output_dir(const std::filesystem::path& dir, LockMode mode, std::string_view command,
                     const std::function<void(const std::string&)>& refuse);

/// Whether this process holds the lock of `dir`.
bool output_dir_locked(const std::filesystem::path& dir);

/// Drops this process's lock of `dir` (nothing when it holds none).
void unlock_output_dir(const std::filesystem::path& dir);

/// The time now in UTC, ISO 8601 to the second ("2026-12-07T03:04:55Z"): lock lines, markers.
std::string now_utc();

}  // namespace gossamer::detail
