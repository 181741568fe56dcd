#pragma once
/// The statistics of one algorithm over the seeds of a sweep (sweep.hpp): means and spreads of
/// the run figures, the time to a target, and quantiles over every peer of every seed. What
/// `gossamer sim` prints in its table and writes with --json and --save.

#include <cmath>
#include <string>
#include <vector>

#include "gossamer/core/json.hpp"
#include "gossamer/core/quantile.hpp"
#include "gossamer/sim/simulation.hpp"

namespace gossamer::sim {

/// The mean of values over seeds and their spread: half the range.
struct Stat {
    double mean = 0, spread = 0;
    int count = 0;  ///< values; 0: none (the mean and spread are 0)
};

Stat stat_of(const std::vector<double>& values);

/// The nearest-rank quantile (core/quantile.hpp), as the sweep reports it.
using gossamer::nearest_rank_quantile;

/// One algorithm's summary over its seeds.
struct AlgorithmSummary {
    std::string algorithm;
    int seeds = 0;
    bool has_goal = false;      ///< a target accuracy (or loss, goal_is_loss) was given
    bool goal_is_loss = false;  ///< the target is a validation loss at most the goal
    bool text = false;          ///< text data: final_loss is nats per character
    int reached = 0;            ///< seeds whose exact average reached the target
    /// Time, samples, MB and backward GMAC per peer until the exact average first reached the
    /// target (over the seeds that reached it).
    Stat time_to_target, samples_to_target, mb_to_target, gmac_to_target;
    /// The first evaluation at which the mean of the peers' own accuracies reached the target
    /// (as gossamer launch measures it); one value per seed that reached it.
    Stat time_to_target_peer_mean;
    /// At the last evaluation: the exact average's accuracy, the least and largest accuracy of
    /// a peer's own model, the consensus distance (math mode; count 0 in cost mode).
    Stat final_accuracy, min_accuracy, max_accuracy, consensus;
    Stat final_loss;  ///< the exact average's loss at the last evaluation (math mode)
    Stat samples_per_s, mb_sent_per_peer, backward_gmac_per_peer, idle_share, end_time;
    Stat mass, mass_start, crash_loss;  ///< push-sum (docs/operations/elastic.md)
    /// p50, p90 and p99 over every peer of every seed of idle_share, bytes_sent and
    /// staleness_max (null where no peer reported).
    json::Json peer_quantiles;
    /// Whether every seed reached the target (so that the "to target" figures mean something).
    bool all_reached() const { return has_goal && reached == seeds; }
};

/// Collects the figures of one algorithm's runs, one seed after another, without keeping the
/// runs.
class SweepStats {
  public:
    /// `goal`: the target accuracy (at least), or with goal_is_loss the target loss (at most)
    /// of the exact average (time_to_target) and of the peers' mean (time_to_target_peer_mean);
    /// NaN: none.
    SweepStats(std::string algorithm, double goal, bool goal_is_loss = false);
    void add(const SimResult& r);
    AlgorithmSummary summary() const;

  private:
    std::string algorithm_;
    double goal_;  // NaN: none
    bool goal_is_loss_ = false, text_ = false;
    int runs_ = 0, reached_ = 0;
    std::vector<double> loss_;
    std::vector<double> t_target_, acc_, lo_, hi_, cons_, sps_, mb_, idle_, end_, gmac_, mb_goal_,
        gmac_goal_, samples_goal_, t_peer_mean_;
    std::vector<double> q_idle_, q_bytes_, q_stale_;  // every peer of every seed
    std::vector<double> masses_, mass_starts_, crash_losses_;
};

/// The summary as `gossamer sim --json` prints it in "algorithms" (docs/modules/simulator.md).
json::Json to_json(const AlgorithmSummary& s);

}  // namespace gossamer::sim
