#pragma once
/// The outer layer's options: the training config's "outer" section (docs/algorithms/outer.md,
/// docs/formats/train-config.md). With them every protocol's step becomes a round of `steps`
/// inner steps followed by an outer optimizer step on the anchor (DiLoCo and its gossip forms).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gossamer/core/json.hpp"
#include "gossamer/core/partition.hpp"

namespace gossamer::optim {

enum class OuterKind { sgd, nesterov };

struct OuterOptions {
    /// H: inner steps per round (>= 1).
    std::int64_t steps = 1;
    /// The outer optimizer: SGD (heavy-ball momentum when momentum > 0) or SGD with Nesterov
    /// momentum, torch.optim.SGD's formulas with dampening 0.
    OuterKind kind = OuterKind::sgd;
    /// Outer learning rate (> 0, finite). The default, 1 with no momentum, is local SGD: the
    /// bounded choice; DiLoCo's 0.7 with Nesterov 0.9 is explicit.
    double lr = 1.0;
    /// Outer momentum in [0, 1).
    double momentum = 0.0;
    /// The partitions the outer optimizer steps (names of the config's partitions); empty: all.
    /// The others take the mixed pseudo-gradient at rate 1 (local SGD).
    std::vector<std::string> partitions;

    /// True when the layer is the identity on every protocol: one inner step and outer SGD at
    /// rate 1 with no momentum. Drivers then skip it (the exact path: today's algorithms bit
    /// for bit).
    bool identity() const noexcept {
        return steps == 1 && kind == OuterKind::sgd && lr == 1.0 && momentum == 0.0 &&
               fragments == 0;
    }
    /// One line for logs, the handshake and the report: "H=8 nesterov lr=0.7 momentum=0.9".
    std::string describe() const;

    // Streaming fragments (Streaming DiLoCo; docs/algorithms/outer.md, "Streaming"). New fields
    // stay at the end.
    /// k: the model in k fragments, one synchronised per sub-round of steps / k inner steps
    /// (fragment p on sub-rounds r with r % k == p). 0: the key is absent, no streaming.
    std::int64_t fragments = 0;
    /// The fragments are the config's named partitions ("fragments": "partitions"); `fragments`
    /// is then their count.
    bool fragments_are_partitions = false;
    /// alpha in [0, 1): a fragment's inner point after its sync lands,
    /// y_p <- alpha y_p + (1 - alpha) theta_p. The default, 0 (the new anchor only), keeps the
    /// gossip anchors together; Streaming DiLoCo's 0.5 is explicit (docs/algorithms/outer.md).
    double alpha = 0.0;
    /// tau in sub-rounds: a fragment's outer update is merged into the inner point this many
    /// sub-rounds after its pseudo-gradient was taken (0 or 1; 1, the default for k >= 2, lets
    /// the sync travel during the next sub-round's inner steps).
    std::int64_t overlap = 0;

    /// True when "fragments" is given: the StreamingWorker, not the OuterWorker.
    bool streaming() const noexcept { return fragments > 0; }
    /// Inner steps per protocol step: H, or H / k when streaming.
    std::int64_t step_inner_steps() const noexcept {
        return fragments > 0 ? steps / fragments : steps;
    }
    friend bool operator==(const OuterOptions&, const OuterOptions&) = default;
};

/// Reads the "outer" object. Throws ConfigError naming the JSON path of an unknown key, a wrong
/// type or a value out of range (steps < 1, lr not finite and > 0, momentum outside [0, 1), an
/// unknown optimizer). Partition names are checked against the model later (OuterWorker).
OuterOptions parse_outer_options(const json::Node& node);
/// The config's "outer" section, or nullopt when it has none.
std::optional<OuterOptions> find_outer_options(const json::Node& root);

/// ConfigError naming `config_file` and outer.partitions when a name of o.partitions is not a
/// partition of `layout` (nullptr: none may be named). Drivers call it before anything starts.
void check_outer_partitions(const OuterOptions& o, const PartitionLayout* layout,
                            const std::string& config_file);

/// Rounds a peer takes for `inner_steps` inner steps: ceil(inner_steps / steps), or
/// sub-rounds (ceil(inner_steps / (steps / fragments))) when streaming.
std::int64_t outer_rounds(std::int64_t inner_steps, const OuterOptions& o);

}  // namespace gossamer::optim
