#pragma once
/// The settings every peer of a job must agree on, as the start-up handshake compares them
/// (docs/modules/bootstrap.md, "What the handshake compares"): one bootstrap::Setting per field,
/// with a digest of the value, a short description and a fix that names the option to change.
/// `gossamer peer` sends all of them; gossamer::Peer sends those it has (no training inputs).

#include <string>
#include <vector>

#include "gossamer/bootstrap/settings.hpp"
#include "gossamer/core/json.hpp"
#include "gossamer/optimizers/local/multirate.hpp"
#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/topology/topology_file.hpp"

namespace gossamer::peer {

using bootstrap::Setting;

/// Who set the values, so that a fix names the right option.
enum class SettingSource {
    cli,  ///< gossamer peer: files and flags
    api,  ///< gossamer::Peer: PeerOptions
};

/// "topology graph" (every round's edges over one period, and the period; for a schedule with
/// no period, its description and its first rounds) and "topology weights" (every such round's
/// mixing matrix, the weight rule and kind). Not the peer list: the handshake compares it apart.
void add_topology_settings(std::vector<Setting>& out, const topology::Topology& topology,
                           SettingSource source);

/// "algorithm" (the name) and "algorithm options" (the options' JSON with keys sorted; absent,
/// null and {} are all the defaults).
void add_algorithm_settings(std::vector<Setting>& out, const std::string& algorithm,
                            const json::Json* options, SettingSource source);

/// "partitions": each partition's name, period, gossip period and compressor, and the backward
/// mode (multirate.hpp). The layout itself (names and ranges) is compared apart.
void add_partition_settings(std::vector<Setting>& out, const optim::Multirate& rates,
                            SettingSource source);

/// gossamer peer's training inputs: "epochs", "batch size", "sharding", "seed", "data set"
/// (not its folder, which may differ between hosts), "model" and "optimizer" (with the
/// schedule). Not the step count: it follows from a peer's shard, which may differ.
void add_training_settings(std::vector<Setting>& out, const optim::TrainingConfig& config,
                           int epochs);

/// "cluster file": its JSON with keys sorted, or "no cluster file" for an empty path. Throws
/// ConfigError as json::load_file.
void add_cluster_setting(std::vector<Setting>& out, const std::string& path);

/// gossamer::Peer's "final average": PeerOptions::exact_average (the exact average and the
/// plain end barrier exchange different messages at the end).
void add_final_average_setting(std::vector<Setting>& out, bool exact_average);

/// gossamer::Peer's "outer": PeerOptions::outer described ("none" without), as gossamer peer
/// compares the config's "outer" (add_training_settings). `fix_field` names the option to align.
void add_outer_setting(std::vector<Setting>& out, const std::optional<optim::OuterOptions>& outer,
                       const std::string& fix_field);

}  // namespace gossamer::peer
