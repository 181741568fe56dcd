#pragma once
/// The model file: parameters with their partition layout and a checksum
/// (docs/formats/model-file.md).
///
/// Little-endian binary: magic "GSMRMODL", version, step, model description, partitions
/// (name, offset, size), the float32 parameters, and a CRC-32 of everything before it. Written
/// to a temporary file in the same folder, flushed to disk, then renamed over the target, so a
/// reader sees the old file or the new one, never half of one.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "gossamer/core/params.hpp"
#include "gossamer/core/partition.hpp"

namespace gossamer {

inline constexpr std::uint32_t kModelFileVersion = 1;

struct ModelFile {
    std::string model;       ///< the model's description, e.g. "mlp 784-256-128-10 (...)"
    std::int64_t step = 0;   ///< training steps taken when it was written
    PartitionLayout layout;  ///< covers the parameters exactly once
    ParamVector params;
};

/// Writes the file atomically. Throws Error naming the path when it cannot be written (the
/// target is then unchanged) or when `params.size()` differs from the layout's total.
/// Writes `bytes` to path + ".tmp", fsyncs it and renames it over `path`, so a reader (or a
/// crash) never sees a torn file. Throws Error "PATH: cannot create|write|flush|rename WHAT:
/// reason" (`what`: "model file", "checkpoint"), with the temporary file removed.
void write_file_atomically(const std::string& path, std::string_view bytes, const char* what);

void save_model_file(const std::string& path, std::string_view model, std::int64_t step,
                     const PartitionLayout& layout, std::span<const float> params);

/// Reads and checks a file. Throws ConfigError naming the path for a missing file, a folder, a
/// wrong magic number or version, a truncated file, an invalid layout or a checksum mismatch.
ModelFile load_model_file(const std::string& path);

/// Checks and decodes the bytes of a model file (what load_model_file does once it has read
/// them); `label` names the file in errors. Throws ConfigError as load_model_file.
ModelFile parse_model_file(std::string_view label, std::string_view bytes);

}  // namespace gossamer
