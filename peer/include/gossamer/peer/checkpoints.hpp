#pragma once
/// Where a job's checkpoints lie and which step a resume starts from
/// (docs/operations/checkpoint.md). Each peer writes OUT/checkpoint-<R>-<S>.state
/// (core/checkpoint_file.hpp) at its cut after S steps; a resume starts every peer from one step S
/// that they all hold.

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gossamer::peer {

/// DIR/checkpoint-<rank>-<step>.state
std::filesystem::path checkpoint_path(const std::filesystem::path& dir, int rank,
                                      std::int64_t step);

/// The checkpoint files in `dir` of ranks 0..n-1: rank -> its steps, ascending (ranks without
/// any are absent). Files of other names or ranks are ignored.
std::map<int, std::vector<std::int64_t>> list_checkpoints(const std::filesystem::path& dir, int n);

/// The step a resume from `dir` starts at: `wanted` when given (it must be held by every rank
/// considered), else the newest step they all hold. The ranks considered: every rank 0..n-1
/// when `rank` is -1 (a launcher, which sees the whole job's folder); else `rank` and every
/// other rank whose files are in `dir` (a peer whose folder is its own; the handshake then
/// checks that all peers resume at the same step). Throws ConfigError naming `flag` and `dir`
/// with one line when the folder is missing, holds no checkpoint of a needed rank, or the ranks
/// share no step.
std::int64_t resume_step(const std::filesystem::path& dir, int n, int rank,
                         std::optional<std::int64_t> wanted, const std::string& flag);

/// The step a peer rejoining a running job (--join --resume) takes its model from: `wanted`
/// when given, else the newest step of `rank` in `dir`; other ranks' files do not matter (the
/// others are not resuming). Throws ConfigError naming `flag` and `dir` with one line when the
/// folder is missing, holds no checkpoint of `rank`, or not the step wanted.
std::int64_t own_resume_step(const std::filesystem::path& dir, int n, int rank,
                             std::optional<std::int64_t> wanted, const std::string& flag);

}  // namespace gossamer::peer
