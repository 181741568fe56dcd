#pragma once
/// Reading the files a user names and writing the files a run leaves (docs/operations/errors.md,
/// "Files").
///  - An input is read only when it is a regular file (a FIFO would block for ever, /dev/zero
///    would never end, a folder reads as nothing), and only up to a size bound that the error
///    line names. Every input read is remembered, so that an output folder about to be replaced
///    refuses to delete one (output_dir.hpp).
///  - An output is written to a temporary name beside it, flushed, checked and renamed: a full
///    disk leaves the earlier file or none, never a short one, and throws IoError naming the
///    path and the cause.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gossamer/core/error.hpp"

namespace gossamer {

/// The machine refused a read or a write that a run needs (a full disk, a read-only file system,
/// a lost permission): exit status 2. The message names the path and the cause, e.g.
/// "out/model.bin: cannot write the model file: No space left on device".
class IoError : public Error {
  public:
    using Error::Error;
};

/// A kind of input: how the error lines name it and the most bytes read of it.
struct InputKind {
    std::string_view noun;   ///< in "cannot open NOUN": "file", "model file", "checkpoint"
    std::string_view group;  ///< in "the bound on GROUP": "JSON inputs (...)", "model files"
    std::uint64_t limit;     ///< bytes
};

/// Topology, cluster and training config files, and every other JSON input: 256 MiB.
inline constexpr InputKind kJsonInput{
    "file", "JSON inputs (topology, cluster file, training config)", std::uint64_t{256} << 20};
/// Model files (model.bin): 64 GiB.
inline constexpr InputKind kModelInput{"model file", "model files", std::uint64_t{64} << 30};
/// Peer checkpoints (.state): 64 GiB.
inline constexpr InputKind kCheckpointInput{"checkpoint", "checkpoints", std::uint64_t{64} << 30};

/// Reads the whole regular file `path`, at most `kind.limit` bytes. Throws ConfigError(path, "",
/// ...) when it cannot be opened or read, is not a regular file (a folder, a FIFO, a device, a
/// socket: "is a FIFO (named pipe), not a regular file"), or is larger than the bound ("the
/// file is 300.00 MiB, more than the 256.00 MiB bound on JSON inputs (...)"). Never blocks on
/// a FIFO. Records `path` as an input (input_files()).
std::string read_input_file(const std::string& path, const InputKind& kind);

/// Checks `path` as read_input_file does (a regular file within the bound) without reading it,
/// for readers that stream the file themselves; records it as an input.
void check_input_file(const std::string& path, const InputKind& kind);

/// Records `path` as an input (input_files()).
std::string read_input_file(const std::string& path, std::string_view what, std::uint64_t limit);

/// Checks `path` as read_input_file does (a regular file within the bound) without reading it,
/// for readers that stream the file themselves; records it as an input.
void check_input_file(const std::string& path, const InputKind& kind);

/// Records `path` as an input of this process (read_input_file does it; thread-safe).
void note_input_file(const std::string& path);

/// The inputs recorded so far, as given.
std::vector<std::string> input_files();

/// Forgets the recorded inputs (tests; a library caller between runs).
void forget_input_files();

/// Writes `bytes` to path + ".tmp", flushes it to disk and renames it over `path`, so a reader
/// (or a crash, or a full disk) never sees a torn file. Throws IoError "PATH: cannot
/// create|write|flush|rename WHAT: CAUSE" (`what`: "model file", "result", ...), with the
/// temporary file removed and `path` unchanged.
void write_file_atomically(const std::string& path, std::string_view bytes, const char* what);

}  // namespace gossamer
