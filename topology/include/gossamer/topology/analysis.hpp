#pragma once
/// Analysis of a topology schedule: connectivity, stochasticity, spectral gap, the rounds an
/// averaging run needs, degrees and traffic. This is what `gossamer topo show` prints.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gossamer/core/json.hpp"
#include "gossamer/topology/schedule.hpp"

namespace gossamer::topology {

struct AnalysisOptions {
    std::uint64_t model_bytes = 4u << 20;  ///< model size M for the traffic figures (bytes)
    std::int64_t max_rounds = 1'000'000;   ///< cap on the averaging run
    double target = 1e-6;                  ///< disagreement reduction the averaging run aims at
    std::uint64_t seed = 1;                ///< seed of the random start vector
    std::int64_t sample_rounds = 256;      ///< rounds examined for a schedule with no period
    int dense_limit = 4096;                ///< largest n for the dense spectral analysis
    /// Bound on the averaging run's work in multiply-adds, rounds x (nonzeros of W + n): past it
    /// the run stops before max_rounds, and the report says so (rounds_note). 0: no bound (a
    /// caller that asked for max_rounds explicitly). 4e9 is about 5 s on one core.
    std::int64_t max_work = 4'000'000'000;
    /// Called with a short line before each stage that can take a while (may be empty).
    std::function<void(std::string_view)> progress;
    /// Called often during the averaging run (round reached, disagreement) for a progress line
    /// that moves; the caller rate-limits what it prints (may be empty).
    std::function<void(std::string_view)> update;
};

struct Report {
    std::string description;
    int n = 0;
    std::optional<std::int64_t> period;  ///< nullopt: random schedule, no period
    std::int64_t rounds_examined = 0;    ///< the period, or the sampled rounds
    WeightKind kind = WeightKind::averaging;
    bool directed = false;            ///< some round has an edge without its reverse
    int connected_rounds = 0;         ///< rounds whose own graph is strongly connected
    bool strongly_connected = false;  ///< the union over the examined rounds
    bool row_stochastic = false;      ///< every examined W
    bool column_stochastic = false;
    bool symmetric = false;
    /// SLEM of the product over one period (static: of W). For a random schedule, an estimate of
    /// the per-round rate from sampled averaging runs (spectral_estimate is then true).
    std::optional<double> slem;
    std::optional<double> spectral_gap;    ///< 1 - slem
    std::optional<double> rate_per_round;  ///< slem^(1/period)
    bool spectral_estimate = false;
    std::string spectral_note;                     ///< why the spectrum was skipped, if it was
    std::optional<std::int64_t> rounds_to_target;  ///< nullopt: not reached within max_rounds
    double target = 1e-6;
    std::int64_t max_rounds = 0;  ///< rounds the averaging run could take (after max_work)
    /// Why max_rounds is below the requested cap (the work bound for a large n), or "".
    std::string rounds_note;
    int max_degree = 0;  ///< max over rounds and peers of max(in-degree, out-degree)
    int min_in_degree = 0, max_in_degree = 0, min_out_degree = 0, max_out_degree = 0;
    double mean_out_degree = 0;
    std::uint64_t model_bytes = 0;
    double bytes_per_round_max = 0;   ///< bytes the busiest peer sends per round (mean over rounds)
    double bytes_per_round_mean = 0;  ///< bytes a peer sends per round, mean over peers and rounds
};

Report analyse(const Schedule& s, const AnalysisOptions& options = {});

/// Rounds an averaging run from a random start (seeded) needs to shrink the disagreement
/// ||x - mean(x)|| by `target` (push-sum kind: of z = x / w); nullopt if not within max_rounds.
std::optional<std::int64_t> rounds_to_consensus(const Schedule& s, double target,
                                                std::int64_t max_rounds, std::uint64_t seed);

/// The relative disagreement after each round of the same averaging run: element t is
/// ||x_t - mean|| / ||x_0 - mean|| (element 0 is 1). Stops after `rounds` rounds or once the value
/// falls below `stop_below`.
std::vector<double> consensus_curve(const Schedule& s, std::int64_t rounds, std::uint64_t seed,
                                    double stop_below = 1e-12);

/// The report as one JSON object (the keys of `gossamer topo show --json`).
json::Json to_json(const Report& r);
/// The report as an aligned, human-readable table.
std::string to_text(const Report& r);
/// Several reports side by side, one row each (labels name the rows, e.g. file names).
std::string to_comparison_table(const std::vector<std::string>& labels,
                                const std::vector<Report>& reports);

}  // namespace gossamer::topology
