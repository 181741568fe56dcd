#pragma once
/// Error types shared by every module (see docs/operations/errors.md).
///
/// Setup and misuse throw; the data path returns error values. A ConfigError always names the
/// file, the JSON path of the offending value, what is wrong and how to fix it, so that the CLI
/// can print it as one line and exit with status 2.

#include <stdexcept>
#include <string>

namespace gossamer {

/// Base class of every exception Gossamer throws on purpose.
class Error : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

/// A user-written file or option is wrong: exit status 2, nothing half-started.
class ConfigError : public Error {
  public:
    /// @param file  the file the value came from ("" for command-line options)
    /// @param path  JSON path of the value ("graph.edges[3]"), or the option name ("--n")
    /// @param what  what is wrong
    /// @param fix   how to fix it (may be empty)
    ConfigError(std::string file, std::string path, std::string what, std::string fix = {});

    const std::string& file() const noexcept { return file_; }
    const std::string& path() const noexcept { return path_; }
    const std::string& problem() const noexcept { return what_; }
    const std::string& fix() const noexcept { return fix_; }

  private:
    std::string file_, path_, what_, fix_;
};

/// A topology is inconsistent (not connected, weights of the wrong kind, bad rank...).
/// Loaders turn it into a ConfigError that names the file; library callers see it directly.
class TopologyError : public Error {
  public:
    using Error::Error;
};

/// A transport operation failed (connection refused, endpoint broken, malformed header).
class TransportError : public Error {
  public:
    using Error::Error;
};

/// A blocking wait ran past its deadline. The message names what was waited for.
class Timeout : public Error {
  public:
    using Error::Error;
};

/// This process's own training produced a NaN or an infinity (its loss, or a value of its model
/// it was about to send): it must stop, send nothing more and write no result
/// (docs/operations/reliability.md, "Non-finite values"). The CLI exits 3 on it, as `train` does.
class Diverged : public Error {
  public:
    using Error::Error;
};

/// A peer failed or vanished; rank() names it.
class PeerFailure : public Error {
  public:
    PeerFailure(int rank, const std::string& what);
    int rank() const noexcept { return rank_; }

  private:
    int rank_;
};

}  // namespace gossamer
