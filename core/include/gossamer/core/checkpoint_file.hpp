#pragma once
/// The checkpoint file of one peer of a job (docs/operations/checkpoint.md): which job, peer and
/// step it belongs to, the model's layout, and the peer's whole state at a consistent cut (its
/// model, optimizer state, step counters and the protocol's state) as an opaque blob that the
/// worker and protocol read back (state_io.hpp). Little-endian, with a CRC-32 of every byte before
/// it; written to a temporary file, flushed, then renamed, so a reader never sees half of one.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gossamer/core/partition.hpp"

namespace gossamer {

inline constexpr std::uint32_t kCheckpointVersion = 1;

/// What identifies the job a checkpoint belongs to; a resume compares each field.
struct CheckpointHeader {
    std::uint64_t job_id = 0;
    std::string algorithm;
    int rank = 0, n = 1;
    std::int64_t step = 0;       ///< local steps every peer of the cut had taken
    std::string model;           ///< the model's description
    PartitionLayout layout;      ///< covers the parameters exactly once
    std::uint64_t settings = 0;  ///< a digest of everything else the job's peers agree on
};

struct CheckpointFile {
    CheckpointHeader header;
    std::vector<char> state;  ///< the worker's state, then the protocol's
};

/// Writes the file atomically. Throws Error naming the path when it cannot be written (the
/// target is then unchanged).
void save_checkpoint_file(const std::string& path, const CheckpointHeader& header,
                          std::span<const char> state);

/// Reads and checks a file. Throws ConfigError naming the path for a missing file, a wrong
/// magic number or version, a truncated file, an invalid layout, trailing bytes or a checksum
/// mismatch.
CheckpointFile load_checkpoint_file(const std::string& path);

/// Checks and decodes the bytes of a checkpoint file; `label` names it in errors.
CheckpointFile parse_checkpoint_file(std::string_view label, std::string_view bytes);

/// The first field in which `got` (a checkpoint's header) differs from `want` (the job being
/// resumed), as "field: checkpoint X, job Y", or "" when they agree. The step is not compared.
std::string checkpoint_mismatch(const CheckpointHeader& got, const CheckpointHeader& want);

}  // namespace gossamer
