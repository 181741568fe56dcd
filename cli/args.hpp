#pragma once
/// A small command-line parser: long options (--name value, --name=value, --flag), positional
/// arguments, generated --help, and one clear line for anything unknown.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "gossamer/core/error.hpp"

namespace gossamer::cli {

/// Wrong command-line usage: printed as one line, exit status 2.
class UsageError : public Error {
  public:
    using Error::Error;
};

struct OptionSpec {
    std::string name;     ///< without the leading "--"
    std::string metavar;  ///< empty for a flag that takes no value
    std::string help;
};

struct ParsedArgs {
    std::map<std::string, std::string> values;
    std::set<std::string> flags;
    std::vector<std::string> positional;
    bool help = false;

    bool flag(const std::string& name) const { return flags.count(name) > 0; }
    std::optional<std::string> value(const std::string& name) const;
    /// An integer option in [lo, hi], or `fallback` when absent; UsageError when malformed.
    std::int64_t integer(const std::string& name, std::int64_t fallback, std::int64_t lo,
                         std::int64_t hi) const;
    /// A finite number, or `fallback` when absent.
    double number(const std::string& name, double fallback) const;
};

class ArgParser {
  public:
    /// @param command     e.g. "gossamer topo show"
    /// @param usage       the argument synopsis, e.g. "FILE [--json]"
    /// @param summary     one paragraph for --help
    /// @param positional  how many positional arguments are required
    /// @param variadic    whether more than `positional` are allowed
    ArgParser(std::string command, std::string usage, std::string summary,
              std::vector<OptionSpec> options, std::size_t positional, bool variadic = false);

    /// Parses args (after the command words). --help sets ParsedArgs::help and skips the checks.
    ParsedArgs parse(const std::vector<std::string>& args) const;
    std::string help() const;

  private:
    [[noreturn]] void fail(const std::string& what) const;
    const OptionSpec* find(const std::string& name) const;

    std::string command_, usage_, summary_;
    std::vector<OptionSpec> options_;
    std::size_t positional_;
    bool variadic_;
};

/// `text` with its control characters escaped for a terminal: C0 controls (ESC, CR, BEL, ...),
/// DEL and the UTF-8 forms of the C1 controls (U+0080..U+009F) as \xNN or \u00NN, a backslash
/// kept as is. Error lines quote values from files and flags (a JSON string, a host name); raw,
/// an ESC sequence in one could rewrite the user's terminal (docs/operations/errors.md).
std::string printable(std::string_view text);

/// --trace-limit MB (default 64) in bytes: the bound on a trace's events (docs/formats/trace.md).
std::size_t trace_limit_bytes(const ParsedArgs& a);

}  // namespace gossamer::cli
