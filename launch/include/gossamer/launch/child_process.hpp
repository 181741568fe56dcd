#pragma once
/// Child processes for `gossamer launch`: each started with fork + exec in its own process group,
/// its stdout and stderr appended to a log file, killed with SIGKILL if this process dies
/// (PR_SET_PDEATHSIG), so a launcher leaves no orphans. Reaping never blocks: the launcher polls
/// with its own timeouts. Only the thread that started the children may use this class.

#include <sys/types.h>

#include <csignal>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gossamer::launch {

/// How a child ended: exit code, or the signal that killed it.
struct ExitStatus {
    int code = -1;   ///< exit code when it exited (else -1)
    int signal = 0;  ///< the signal that killed it (else 0)
    bool ok() const { return signal == 0 && code == 0; }
};
/// "exit status 3", "killed by SIGKILL".
std::string describe(const ExitStatus& s);
/// "SIGINT"; "signal 64" where the name is unknown.
std::string signal_name(int signal);

class Children {
  public:
    Children() = default;
    ~Children() { kill_all(2.0); }
    Children(const Children&) = delete;
    Children& operator=(const Children&) = delete;

    /// Starts `argv` (argv[0] a path) with the environment of this process plus `env` (NAME,
    /// VALUE pairs that override it), output to `log` (created or truncated). Throws Error when
    /// the log cannot be opened or fork fails; a program that cannot be executed exits 127.
    /// Returns the child's index.
    int start(const std::vector<std::string>& argv,
              const std::vector<std::pair<std::string, std::string>>& env,
              const std::filesystem::path& log);

    /// Reaps the children that ended since the last call (never blocks).
    void poll();
    /// How child `i` ended; nullopt while it runs.
    const std::optional<ExitStatus>& status(int i) const { return children_[i].status; }
    int size() const { return static_cast<int>(children_.size()); }
    /// Indices of the children still running (after poll()).
    std::vector<int> running() const;

    /// SIGTERM to every running child's group, up to `grace` seconds for them to end, then
    /// SIGKILL and reap. Returns within about grace + 1 s.
    void kill_all(double grace);

  private:
    struct Child {
        pid_t pid = -1;
        std::optional<ExitStatus> status;
    };
    std::vector<Child> children_;
};

/// The last `n` lines of a text file (fewer if it is shorter; empty if it cannot be read).
std::vector<std::string> last_lines(const std::filesystem::path& path, int n);

/// While alive, SIGINT and SIGTERM set a flag instead of ending this process (the launcher then
/// stops its children and returns); the previous handlers come back on destruction.
class InterruptGuard {
  public:
    InterruptGuard();
    ~InterruptGuard();
    InterruptGuard(const InterruptGuard&) = delete;
    InterruptGuard& operator=(const InterruptGuard&) = delete;
    /// The signal received since construction (0: none).
    static int received();

  private:
    struct sigaction old_int_ {
    }, old_term_{};
};

}  // namespace gossamer::launch
