#pragma once
/// The lab's flags shared by `gossamer lab` and `gossamer launch --hosts netns`.

#include <optional>
#include <string>

namespace gossamer::cli {

/// The peer count of a cluster file: `peers` when given, else the file's "n" (UsageError naming
/// the flag when neither).
int cluster_peer_count(const std::string& path, std::optional<int> peers);

}  // namespace gossamer::cli
