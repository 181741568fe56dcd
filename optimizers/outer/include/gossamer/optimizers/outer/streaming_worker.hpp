#pragma once
/// Streaming fragments (Streaming DiLoCo, Douillard et al. 2025; docs/algorithms/outer.md,
/// "Streaming"): the outer layer with the model cut into k fragments that synchronise one at a
/// time. To the protocol one "step" is a sub-round of H / k inner steps; fragment p syncs on the
/// sub-rounds r with r % k == p. The inner point y stays across sub-rounds:
///
///   compute_gradient(theta):  merge the fragment q whose pseudo-gradient was taken `overlap` + 1
///                             sub-rounds ago: y_q <- alpha y_q + (1 - alpha) theta_q (its new
///                             anchor); H / k inner steps on y; the "gradient" is
///                             Delta_p = theta_p - y_p on the fragment p due now, 0 elsewhere
///   apply_gradient(x, g):     OuterWorker's outer step on fragment p only (its momentum too)
///
/// multirate() gives every fragment gossip period k and offset k - 1 - p, so dpsgd and choco send
/// and mix only the due fragment (a k-th of the bytes of a round, at each sub-round). With
/// overlap 1 the sync of a fragment lands one sub-round (H / k inner steps) after its Delta was
/// taken: dpsgd's "delay": 1 then carries it during those inner steps, with the same result.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gossamer/core/partition.hpp"
#include "gossamer/optimizers/local/multirate.hpp"
#include "gossamer/optimizers/local/worker.hpp"
#include "gossamer/optimizers/outer/outer_options.hpp"
#include "gossamer/optimizers/outer/outer_worker.hpp"

namespace gossamer::optim {

class StreamingWorker final : public proto::LocalWorker {
  public:
    /// `inner` (outlives this) takes `inner_steps` steps in all, in sub-rounds of
    /// options.steps / options.fragments. `layout`: the config's partitions (outer.partitions
    /// and "fragments": "partitions"; nullptr: none). Throws ConfigError naming `config_file`
    /// and outer.fragments for fragments that do not fit the model or layout, and OuterWorker's.
    StreamingWorker(proto::LocalWorker& inner, OuterOptions options, std::int64_t inner_steps,
                    const PartitionLayout* layout, const std::string& config_file = "");

    std::size_t size() const override { return inner_.size(); }
    bool math() const override { return inner_.math(); }
    /// The anchors theta: the inner worker's parameters, which only the protocol changes.
    std::span<float> params() override { return inner_.params(); }
    double compute_gradient(std::span<const float> at) override;
    std::span<const float> gradient() const override { return delta_; }
    void apply_gradient(std::span<float> x, std::span<const float> g) override;
    /// Sub-rounds applied.
    std::int64_t steps() const override { return sub_rounds_; }
    std::int64_t steps_per_gradient() const override;
    std::int64_t inner_steps() const override { return inner_.steps(); }
    bool takes_rounds() const override { return true; }
    /// The fragments as partitions: period 1, gossip period k, offset k - 1 - p.
    const Multirate* multirate() const override { return &rates_; }
    std::span<const proto::PartitionWork> work() const override { return inner_.work(); }
    bool checkpointable() const override { return inner_.checkpointable(); }
    /// OuterWorker's state (the inner worker's, the outer momentum), then the sub-rounds and
    /// the inner point y.
    void save_state(StateWriter& w) const override;
    void restore_state(StateReader& r) override;
    /// A joiner enters at sub-round `sub_round`: inner step sub_round x H / k.
    void enter_at(std::int64_t sub_round) override;

    const OuterOptions& options() const noexcept { return outer_.options(); }
    /// The fragments, [begin, end) by fragment id.
    const PartitionLayout& fragments() const noexcept { return rates_.layout(); }
    /// The inner point y (empty before the first sub-round or in cost mode).
    std::span<const float> inner_point() const noexcept { return y_; }

  private:
    proto::LocalWorker& inner_;
    OuterWorker outer_;  // the outer step (step_range), its momentum and checks
    Multirate rates_;
    std::int64_t inner_total_ = 0, sub_rounds_ = 0;
    std::vector<float> y_, delta_;
};

/// The outer layer `options` asks for around `inner`: a StreamingWorker when it has
/// "fragments", else an OuterWorker (arguments as theirs).
std::unique_ptr<proto::LocalWorker> make_outer_layer(proto::LocalWorker& inner,
                                                     const OuterOptions& options,
                                                     std::int64_t inner_steps,
                                                     const PartitionLayout* layout,
                                                     const std::string& config_file = "");

/// The outer options of `w` when it is an outer layer (OuterWorker or StreamingWorker), else
/// nullptr.
const OuterOptions* outer_options_of(const proto::LocalWorker& w);

/// k equal slices of [0, size) (the first size % k one value longer), named "fragment0", ...
PartitionLayout equal_fragments(std::size_t size, std::int64_t k);

}  // namespace gossamer::optim
