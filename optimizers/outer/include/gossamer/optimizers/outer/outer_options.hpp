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

/// sgd and nesterov: torch.optim.SGD's steps. delayed_nesterov: Async Local-SGD's Delayed
/// Nesterov (Liu et al. 2024), for stale pseudo-gradients: plain steps x -= lr g in between, and
/// every `delay`-th round the momentum takes the mean of the buffered pseudo-gradients and the
/// step is Nesterov's (delay 1 is nesterov exactly).
enum class OuterKind { sgd, nesterov, delayed_nesterov };

/// Rounds by time: how a peer's pseudo-gradient is normalised before the merge (FedNova,
/// Wang et al. 2020). fednova: Delta x (a_ref / a_i) x (share of the data x n), where a_i is the
/// peer's effective step count (its inner learning rates with the momentum factor) and a_ref
/// that of reference_steps steps; none: Delta as it is (fast peers' data weighs more; for
/// comparisons).
enum class OuterNormalize { fednova, none };

struct OuterOptions {
    /// H: inner steps per round (>= 1). Under rounds by time (seconds > 0): reference_steps.
    std::int64_t steps = 1;
    /// Rounds by time: T > 0 seconds per round; every peer takes the inner steps that fit in T
    /// (at least one, at most 8 x reference_steps). 0: rounds of `steps` inner steps.
    double seconds = 0.0;
    /// Rounds by time: the common step count the normalised pseudo-gradients are rescaled to,
    /// and the job's rounds: ceil(inner steps / reference_steps). Required with seconds.
    std::int64_t reference_steps = 0;
    OuterNormalize normalize = OuterNormalize::fednova;
    /// Rounds by time, fednova: the largest factor a peer's pseudo-gradient is scaled up by
    /// (a_ref / a_i is capped at it; >= 1). Over gossip a peer's own scaled step lands on its
    /// own model before any mixing, and a slow peer's short round scaled up 4x overshoots (it
    /// diverged on a ring in the simulator); over an all-reduce the merge is exact at once and a
    /// larger cap is safe. 2 by default: bounded, outer.md "Rounds by time" has the figures.
    double max_scale = 2.0;
    /// delayed_nesterov: the momentum takes a step every `delay` rounds (>= 1).
    std::int64_t delay = 1;
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
        return steps == 1 && seconds == 0.0 && kind == OuterKind::sgd && lr == 1.0 &&
               momentum == 0.0;
    }
    /// True for rounds by time.
    bool timed() const noexcept { return seconds > 0.0; }
    /// Inner steps of a nominal round: steps, or reference_steps under rounds by time.
    std::int64_t round_steps() const noexcept { return timed() ? reference_steps : steps; }
    /// The most inner steps a timed round takes (a bound against a bad step-time estimate).
    std::int64_t max_round_steps() const noexcept { return 8 * reference_steps; }
    /// One line for logs, the handshake and the report: "H=8 nesterov lr=0.7 momentum=0.9".
    std::string describe() const;
    friend bool operator==(const OuterOptions&, const OuterOptions&) = default;
};

/// Reads the "outer" object. Throws ConfigError naming the JSON path of an unknown key, a wrong
/// type or a value out of range (steps < 1, lr not finite and > 0, momentum outside [0, 1), an
/// unknown optimizer). Partition names are checked against the model later (OuterWorker).
OuterOptions parse_outer_options(const json::Node& node);
/// The checks parse_outer_options makes, for options built in code (gossamer::Peer): throws
/// ConfigError(file, prefix + field, ...) for the first value out of range.
void check_outer_values(const OuterOptions& o, const std::string& file, const std::string& prefix);
/// The config's "outer" section, or nullopt when it has none.
std::optional<OuterOptions> find_outer_options(const json::Node& root);

/// ConfigError naming `config_file` and outer.partitions when a name of o.partitions is not a
/// partition of `layout` (nullptr: none may be named). Drivers call it before anything starts.
void check_outer_partitions(const OuterOptions& o, const PartitionLayout* layout,
                            const std::string& config_file);

/// Rounds a peer takes for `inner_steps` inner steps: ceil(inner_steps / round_steps()).
std::int64_t outer_rounds(std::int64_t inner_steps, const OuterOptions& o);

}  // namespace gossamer::optim
