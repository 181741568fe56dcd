#include "gossamer/sim/sweep_stats.hpp"

#include <algorithm>
#include <cstddef>
#include <utility>

#include "gossamer/core/text_metrics.hpp"

namespace gossamer::sim {
namespace {

// p50, p90 and p99 of `v`, over every peer of every seed.
json::Json quantiles(std::vector<double> v) {
    if (v.empty()) return nullptr;
    return {{"p50", nearest_rank_quantile(v, 0.5)},
            {"p90", nearest_rank_quantile(v, 0.9)},
            {"p99", nearest_rank_quantile(v, 0.99)}};
}

}  // namespace

Stat stat_of(const std::vector<double>& v) {
    Stat s;
    s.count = static_cast<int>(v.size());
    if (v.empty()) return s;
    double lo = v[0], hi = v[0], sum = 0;
    for (double x : v) {
        sum += x;
        lo = std::min(lo, x);
        hi = std::max(hi, x);
    }
    s.mean = sum / static_cast<double>(v.size());
    s.spread = (hi - lo) / 2;
    return s;
}

SweepStats::SweepStats(std::string algorithm, double goal, bool goal_is_loss)
    : algorithm_(std::move(algorithm)), goal_(goal), goal_is_loss_(goal_is_loss) {}

void SweepStats::add(const SimResult& r) {
    ++runs_;
    text_ = text_ || r.text;
    const bool has_goal = !std::isnan(goal_);
    masses_.push_back(r.mass);
    mass_starts_.push_back(r.mass_start);
    crash_losses_.push_back(r.crash_loss);
    end_.push_back(r.end_time);
    sps_.push_back(r.samples / std::max(r.end_time, 1e-12));
    double bytes = 0, idle_sum = 0;
    for (const auto& ps : r.peers) {
        bytes += static_cast<double>(ps.bytes_sent);
        idle_sum += ps.idle_share;
        q_idle_.push_back(ps.idle_share);
        q_bytes_.push_back(static_cast<double>(ps.bytes_sent));
        q_stale_.push_back(static_cast<double>(ps.staleness_max));
    }
    mb_.push_back(bytes / r.peers.size() / 1e6);
    double macs = 0;
    for (const auto& ps : r.peers) macs += static_cast<double>(ps.backward_macs);
    gmac_.push_back(macs / r.peers.size() / 1e9);
    idle_.push_back(idle_sum / r.peers.size());
    if (r.evals.empty()) return;
    const auto& last = r.evals.back();
    acc_.push_back(last.accuracy);
    loss_.push_back(last.loss);
    lo_.push_back(last.min_accuracy);
    hi_.push_back(last.max_accuracy);
    cons_.push_back(last.consensus);
    for (const auto& e : r.evals)
        if (has_goal && (goal_is_loss_ ? e.mean_loss <= goal_ : e.mean_accuracy >= goal_)) {
            t_peer_mean_.push_back(e.time);
            break;
        }
    for (const auto& e : r.evals)
        if (has_goal && (goal_is_loss_ ? e.loss <= goal_ : e.accuracy >= goal_)) {
            t_target_.push_back(e.time);
            const double n_peers = static_cast<double>(r.peers.size());
            mb_goal_.push_back(static_cast<double>(e.bytes) / n_peers / 1e6);
            gmac_goal_.push_back(static_cast<double>(e.backward_macs) / n_peers / 1e9);
            samples_goal_.push_back(static_cast<double>(e.samples));
            ++reached_;
            break;
        }
}

AlgorithmSummary SweepStats::summary() const {
    AlgorithmSummary s;
    s.algorithm = algorithm_;
    s.seeds = runs_;
    s.has_goal = !std::isnan(goal_);
    s.goal_is_loss = goal_is_loss_;
    s.text = text_;
    s.final_loss = stat_of(loss_);
    s.reached = reached_;
    s.time_to_target = stat_of(t_target_);
    s.samples_to_target = stat_of(samples_goal_);
    s.mb_to_target = stat_of(mb_goal_);
    s.gmac_to_target = stat_of(gmac_goal_);
    s.time_to_target_peer_mean = stat_of(t_peer_mean_);
    s.final_accuracy = stat_of(acc_);
    s.min_accuracy = stat_of(lo_);
    s.max_accuracy = stat_of(hi_);
    s.consensus = stat_of(cons_);
    s.samples_per_s = stat_of(sps_);
    s.mb_sent_per_peer = stat_of(mb_);
    s.backward_gmac_per_peer = stat_of(gmac_);
    s.idle_share = stat_of(idle_);
    s.end_time = stat_of(end_);
    s.mass = stat_of(masses_);
    s.mass_start = stat_of(mass_starts_);
    s.crash_loss = stat_of(crash_losses_);
    s.peer_quantiles = {{"idle_share", quantiles(q_idle_)},
                        {"bytes_sent", quantiles(q_bytes_)},
                        {"staleness_max", quantiles(q_stale_)}};
    return s;
}

json::Json to_json(const AlgorithmSummary& s) {
    const auto or_null = [](bool known, double value) {
        return known ? json::Json(value) : json::Json(nullptr);
    };
    const bool all = s.all_reached();
    json::Json j = {
        {"algorithm", s.algorithm},
        {"time_to_target", or_null(all, s.time_to_target.mean)},
        {"time_to_target_spread", s.time_to_target.spread},
        // The same target for the mean of the peers' own accuracies (like gossamer launch).
        {"time_to_target_peer_mean",
         or_null(s.has_goal && s.time_to_target_peer_mean.count == s.seeds,
                 s.time_to_target_peer_mean.mean)},
        {"samples_to_target", or_null(all, s.samples_to_target.mean)},
        {"reached", s.reached},
        {"final_accuracy", s.final_accuracy.mean},
        {"final_accuracy_spread", s.final_accuracy.spread},
        {"min_accuracy", s.min_accuracy.mean},
        {"max_accuracy", s.max_accuracy.mean},
        {"consensus", s.consensus.mean},
        {"samples_per_s", s.samples_per_s.mean},
        {"mb_sent_per_peer", s.mb_sent_per_peer.mean},
        {"idle_share", s.idle_share.mean},
        {"backward_gmac_per_peer", s.backward_gmac_per_peer.mean},
        {"mb_to_target_per_peer", or_null(all, s.mb_to_target.mean)},
        {"mb_to_target_spread", s.mb_to_target.spread},
        {"backward_gmac_to_target_per_peer", or_null(all, s.gmac_to_target.mean)},
        {"backward_gmac_to_target_spread", s.gmac_to_target.spread},
        {"end_time", s.end_time.mean},
        {"mass", s.mass.mean},
        {"mass_start", s.mass_start.mean},
        {"crash_loss", s.crash_loss.mean},
        {"peer_quantiles", s.peer_quantiles}};
    // Text data adds fields; every other summary stays as it was.
    if (s.text) {
        j["final_loss"] = s.final_loss.mean;
        j["final_loss_spread"] = s.final_loss.spread;
        j["final_bpc"] = text_metrics::bits_per_char(s.final_loss.mean);
    }
    return j;
}

}  // namespace gossamer::sim
