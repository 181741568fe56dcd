#pragma once
/// Multirate partitions (Vlaar & Leimkuhler, "Multirate training of neural networks", 2022):
/// each partition of the layout has a period k. It takes an optimizer step only on the steps s
/// with (s + 1) % k == 0, at k times the schedule's rate for s, from the gradient of that step;
/// on the other steps its layers' backward pass is skipped where the model allows. Each partition
/// may also gossip (dpsgd) with its own period and compressor. See docs/algorithms/multirate.md.
///
/// Config (the training config's "multirate" section; partitions not named keep period 1):
///   "multirate": {"backward": "skip" | "full",
///                 "partitions": {"slow": {"period": 4, "gossip_period": 4,
///                                         "compressor": {"name": "fp16"}}}}

#include <cstdint>
#include <optional>
#include <vector>

#include "gossamer/core/json.hpp"
#include "gossamer/core/partition.hpp"
#include "gossamer/optimizers/compress/compressor.hpp"

namespace gossamer::optim {

/// The rates of one partition.
struct PartitionRate {
    int period = 1;         ///< updates on steps s with (s + 1) % period == 0, at period * lr(s)
    int gossip_period = 1;  ///< dpsgd, choco: mixed on steps s with (s + 1) % gossip_period == 0
    /// dpsgd, choco: Q of its deltas (none: exact floats in dpsgd, choco's own compressor)
    std::optional<CompressorConfig> compressor;
    /// dpsgd, choco: gossips that many steps before its period's end, on steps s with
    /// (s + 1 + gossip_offset) % gossip_period == 0; in [0, gossip_period). Streaming fragments
    /// (optim::StreamingWorker) stagger their syncs with it; no config key sets it.
    int gossip_offset = 0;
};

/// skip: a step computes the backward pass only for layers of partitions that update on it;
/// full: every step computes the whole gradient (same updates, no saving; for comparisons).
enum class BackwardMode { skip, full };

/// The rates of every partition of one layout.
class Multirate {
  public:
    /// Every partition updates and gossips every step (plain training).
    Multirate() = default;
    explicit Multirate(PartitionLayout layout);
    /// `rates` has one entry per partition of `layout`; throws Error otherwise or for a period
    /// below 1.
    Multirate(PartitionLayout layout, std::vector<PartitionRate> rates, BackwardMode backward);

    /// Whether a step has the phase of `period`, `offset` steps early:
    /// (step + 1 + offset) % period == 0.
    static bool due(int period, std::int64_t step, int offset = 0) noexcept {
        return (step + 1 + offset) % period == 0;
    }

    /// True when some partition has a period or gossip period above 1 or a compressor.
    bool active() const noexcept;
    /// True when some partition gossips on its own terms (gossip period above 1 or compressor).
    bool per_partition_gossip() const noexcept;
    const PartitionLayout& layout() const noexcept { return layout_; }
    std::size_t count() const noexcept { return rates_.size(); }
    const PartitionRate& rate(std::size_t id) const { return rates_.at(id); }
    BackwardMode backward() const noexcept { return backward_; }
    /// Whether partition `id` takes an optimizer step on step `step`.
    bool updates(std::size_t id, std::int64_t step) const { return due(rate(id).period, step); }
    /// Whether partition `id` is mixed on step `step`.
    bool gossips(std::size_t id, std::int64_t step) const {
        return due(rate(id).gossip_period, step, rate(id).gossip_offset);
    }

    /// The config section it was read from, for errors found once the algorithm is known.
    std::optional<json::Node> source;

  private:
    PartitionLayout layout_;
    std::vector<PartitionRate> rates_;
    BackwardMode backward_ = BackwardMode::skip;
};

/// Reads a "multirate" section for `layout`. Throws ConfigError (file, JSON path, fix) for an
/// unknown key or partition name, a period or gossip period below 1, a bad compressor, or
/// periods that leave no partition updating every step.
Multirate parse_multirate(const json::Node& node, const PartitionLayout& layout);

// Whether an algorithm honours per-partition gossip is its registry entry's to say:
// proto::check_multirate_algorithm (gossamer/optimizers/protocol/questions.hpp).

}  // namespace gossamer::optim
