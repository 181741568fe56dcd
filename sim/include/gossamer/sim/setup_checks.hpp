#pragma once
/// Checks of a simulation's sizes before it runs (docs/modules/simulator.md, "Sizes"): the memory
/// its peers keep, and dpsgd's and choco's resync timeouts against the time one full model takes on
/// the slowest link. Both are one ConfigError line, so a size that cannot work is refused up front
/// instead of ending in a std::bad_alloc half-way.

#include <cstdint>
#include <string>

#include "gossamer/sim/simulation.hpp"

namespace gossamer::sim {

/// About the bytes simulate(s) keeps for its peers' values, with `parameters` floats per model:
/// per peer (math mode) parameters x 4 bytes x (the parameters and the gradient, the
/// optimizer's state, and the protocol's copies, its registry entry's model_copies: 3 for
/// allreduce, 1 + 3 x the largest in-degree for the gossip protocols: replicas, receive buffers,
/// messages in flight). Cost mode keeps no values: 0.
double memory_needed(const SimSetup& s, std::uint64_t parameters);

/// Where a setup's sizes came from, for the error lines.
struct SizeOrigin {
    std::string config_file;  ///< the training config ("" when none)
    std::string size_flag;    ///< the flag that set the model size ("--model-size"), or ""
};

/// Throws ConfigError when memory_needed() exceeds what the machine leaves (core/memory.hpp), or
/// when the protocol's resync_timeout (its registry entry's: dpsgd's, choco's) is not longer
/// than one full model of `parameters` floats takes over the slowest link of the cluster
/// (waiting peers would then ask for full copies faster than they arrive, and the event queue
/// would grow without bound), and when the cluster has churn (join_at, leave_at, rejoin_at) that
/// the algorithm cannot follow (proto::elastic_refusal, proto::check_churn;
/// docs/operations/elastic.md).
void check_sizes(const SimSetup& s, std::uint64_t parameters, const SizeOrigin& origin);

/// The most evaluations one run may make (math mode): each judges the exact average on the
/// test set, so 10^5 of them already take minutes to hours.
inline constexpr double kMaxEvaluations = 100'000;

/// Where a run's length and evaluation interval came from, for the error lines.
struct WorkOrigin {
    std::string steps_file;       ///< the file that set the steps ("" for a flag)
    std::string steps_path;       ///< "--steps", "--epochs" or "training.epochs"
    bool interval_given = false;  ///< --eval-interval given (else the default from base_time)
};

/// A lower bound on the virtual time a run of `steps` local steps per peer lasts: each step
/// takes at least the fastest peer's declared step time (base_time x factor), and for
/// allreduce (2(n-1) hops), dpsgd and choco (one hop) and sgp (one hop per staleness + 1
/// steps) at their default options also waits for messages over the least latency of the
/// cluster's links. Other algorithms and options count compute only.
Time run_time_floor(const SimSetup& s, double steps);

/// Throws ConfigError, before anything runs, when a run cannot finish in reasonable time: more
/// than EventQueue::kMaxPushed events (n peers x `steps` steps at least), or, in math mode,
/// more than kMaxEvaluations evaluations (run_time_floor() / eval_interval). The line gives
/// the estimate, names the value that made it (--eval-interval, the cluster's base_time,
/// --steps or the epochs) and the fix (docs/modules/simulator.md, "Sizes").
void check_work(const SimSetup& s, double steps, const WorkOrigin& origin);

}  // namespace gossamer::sim
