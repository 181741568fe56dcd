#pragma once
/// The outer layer (docs/algorithms/outer.md): a LocalWorker around the peer's own worker, so
/// that every protocol reaches it without knowing it. To the protocol one "step" is one round:
///
///   compute_gradient(theta):  y <- theta; k inner steps on y with the inner worker (its own
///                             optimizer, whose state stays across rounds, and its schedule over
///                             inner steps); the "gradient" is the pseudo-gradient
///                             Delta = theta - y, and the loss the mean of the inner losses
///   apply_gradient(x, g):     the outer optimizer's step on x with g (whatever the protocol
///                             made of Delta: the all-reduce's mean, this peer's own Delta):
///                             m <- mu m + g; sgd: x -= lr m; nesterov: x -= lr (g + mu m)
///
/// So the protocol's model is the anchor theta; inner points are never mixed or evaluated.
/// allreduce over it is DiLoCo; dpsgd's adapt-then-combine mixes the outer-stepped anchors,
/// theta_i <- sum_j W_ij (theta_j - lr outer_j), one vector per round; push-sum protocols step
/// the numerator as they step it with a gradient (their mass is untouched).
///
/// Rounds by time (OuterOptions::seconds): the driver plans each round's step count k_i
/// (plan_round), and the pseudo-gradient is normalised as FedNova does (outer.md, "Rounds by
/// time"): Delta x share x (a_ref / a_i), with a_i = sum_j lr_j (1 - mu^(k_i - j)) / (1 - mu) over
/// the round's inner steps (mu: the inner SGD momentum) and a_ref the same sum over
/// reference_steps steps. Inner step j of round r takes the schedule's rate at
/// r x reference_steps + floor(j x reference_steps / k_i): every peer walks the schedule at the
/// job's pace, whatever its speed; batches follow each peer's own count.
///
/// Named partitions (OuterOptions::partitions) take the outer step; the rest take g at rate 1
/// (x -= g: local SGD). The inner worker keeps its step count (learning rate, batch order) in
/// inner steps; steps() counts rounds. Host memory only (a device worker is refused).

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gossamer/core/partition.hpp"
#include "gossamer/optimizers/local/worker.hpp"
#include "gossamer/optimizers/outer/outer_options.hpp"

namespace gossamer::optim {

class OuterWorker final : public proto::LocalWorker {
  public:
    /// `inner` (outlives this) takes `inner_steps` steps in all, in rounds of options.steps.
    /// `layout` resolves options.partitions (nullptr: no names allowed). Throws ConfigError
    /// naming `config_file` and outer.partitions for an unknown name, or outer for a worker on a
    /// device or one trained with multirate rates.
    OuterWorker(proto::LocalWorker& inner, OuterOptions options, std::int64_t inner_steps,
                const PartitionLayout* layout, const std::string& config_file = "");

    std::size_t size() const override { return inner_.size(); }
    bool math() const override { return inner_.math(); }
    /// The anchor theta: the inner worker's parameters, which only the protocol changes.
    std::span<float> params() override { return inner_.params(); }
    double compute_gradient(std::span<const float> at) override;
    std::span<const float> gradient() const override { return delta_; }
    void apply_gradient(std::span<float> x, std::span<const float> g) override;
    /// Rounds by time: the inner schedule's rate at a step, the inner SGD momentum and this
    /// peer's share of the data times the number of peers (1 for equal shards). Without it the
    /// rate is taken as 1 (only the step counts normalise).
    void set_inner_rates(std::function<double(std::int64_t)> lr_at, double momentum,
                         double data_weight);
    double round_seconds() const override;
    void plan_round(std::int64_t steps) override { planned_ = steps; }
    /// Rounds applied.
    std::int64_t steps() const override { return rounds_; }
    std::int64_t steps_per_gradient() const override;
    std::int64_t inner_steps() const override { return inner_.steps(); }
    bool takes_rounds() const override { return true; }
    std::span<const proto::PartitionWork> work() const override { return inner_.work(); }
    bool checkpointable() const override { return inner_.checkpointable(); }
    /// The inner worker's state (theta, its optimizer, its step count), the rounds and the
    /// outer momentum.
    void save_state(StateWriter& w) const override;
    void restore_state(StateReader& r) override;
    /// A joiner enters at round `round`: inner step round x H.
    void enter_at(std::int64_t round) override;

    const OuterOptions& options() const noexcept { return options_; }
    /// The outer momentum buffer (empty until the first momentum step, or with momentum 0).
    std::span<const float> momentum() const noexcept { return m_; }

  private:
    void outer_step(std::span<float> x, std::span<const float> g, std::size_t begin,
                    std::size_t end, bool momentum_due);
    /// Rounds by time: the factor Delta is multiplied by for a round of k steps.
    double fednova_scale(std::int64_t round, std::int64_t k) const;
    double effective_steps(std::int64_t first, std::int64_t k, std::int64_t span) const;

    proto::LocalWorker& inner_;
    OuterOptions options_;
    std::int64_t inner_total_ = 0, rounds_ = 0;
    std::int64_t computed_ = 0;  // rounds computed (compute side; rounds_ is the protocol's)
    std::int64_t planned_ = 0;   // rounds by time: the driver's plan for the next round
    std::function<double(std::int64_t)> lr_at_;
    double inner_momentum_ = 0.0, data_weight_ = 1.0;
    std::vector<float> y_, delta_, m_;
    std::vector<float> buffer_;  // delayed_nesterov: pseudo-gradients since the last momentum step
    std::vector<std::pair<std::size_t, std::size_t>> outer_ranges_;  // [begin, end), sorted
};

}  // namespace gossamer::optim
