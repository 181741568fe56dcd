#pragma once
/// Output folders (docs/operations/cli.md, "Output folders"): every folder a Gossamer command
/// writes its results into carries a marker file, `.gossamer-output` (JSON: the command, the time,
/// the version). The rule, the same for train, sim, launch and peer:
///  - a missing folder is created (with its parents) and marked;
///  - an empty folder is marked and used;
///  - a marked folder holds an earlier Gossamer run: `replace` removes its contents (and says
///    so), `share` keeps them (the peers of one job write into one folder, each its own files);
///  - a non-empty folder without the marker is refused: Gossamer deletes nothing it did not
///    write;
///  - a folder that would be replaced but holds an input this process has read (a topology,
///    config, cluster, model or token file: file_io.hpp's input_files()) is refused before
///    anything is removed;
///  - the folder is locked (a flock on OUT/.gossamer-output.lock) until the process ends:
///    exclusively by train, sim and launch, shared by the peers of a job; a folder another
///    process holds is refused ("... is in use by gossamer train (pid 123, since ...)").
/// Every problem is a ConfigError naming where the folder came from (a flag or a config key),
/// thrown before anything is written, so a command can call this before it starts any work.

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gossamer {

/// The marker file's name.
inline constexpr std::string_view kOutputMarker = ".gossamer-output";

/// Where the user named the folder, for the error line: a flag ({"", "--out"}) or a config
/// key ({"train.json", "output.dir"}).
struct OutputOrigin {
    std::string file;  ///< "" for a command-line flag
    std::string path;  ///< the flag or the JSON path
};

enum class OutputUse {
    replace,  ///< train, sim, launch: a marked folder's earlier contents are removed; locked
              ///< exclusively
    share,    ///< peer: a marked folder is kept; several peers of a job write into it (a shared
              ///< lock)
    keep,     ///< launch --resume: a marked folder is kept, and locked exclusively
    replace_for_peers,  ///< launch's OUT/<algorithm>: replaced like `replace`, then the lock is
                        ///< shared with the peer processes the launcher starts there
};

/// Makes `dir` ready as the output folder of `command` (e.g. "gossamer train") by the rule
/// above, and checks that the files named in `files` (relative to `dir`) can be written there:
/// none of them may be a folder, and the folder must take a new file. Returns one line for the
/// user when an earlier run's output was replaced (nullopt otherwise). Throws ConfigError at
/// `origin` when `dir` is a file, lies under a file, cannot be created or written (e.g. under
/// /proc), is a non-empty folder without the marker, holds an input it would delete, or is
/// locked by another process.
std::optional<std::string> prepare_output_dir(const std::filesystem::path& dir,
                                              std::string_view command, const OutputOrigin& origin,
                                              OutputUse use = OutputUse::replace,
                                              const std::vector<std::string>& files = {});

/// Drops this process's lock of `dir` (tests; a library caller done with a folder). The lock
/// goes anyway when the process ends.
void release_output_dir(const std::filesystem::path& dir);

/// Whether `dir` carries the marker.
bool is_output_dir(const std::filesystem::path& dir);

}  // namespace gossamer
