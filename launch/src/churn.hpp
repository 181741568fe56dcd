#pragma once
// gossamer launch following the cluster file's churn with real peers (docs/operations/elastic.md,
// "Real peers"): which ranks start late and which come back after their failure time, when, and the
// files of a rank's earlier processes. Times are on the job's clock: seconds since the launcher
// started the algorithm's peers (each peer gets that origin as --job-start).

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "gossamer/core/json.hpp"
#include "gossamer/launch/launch.hpp"

namespace gossamer::launch {

/// When each rank's processes start.
struct ChurnPlan {
    /// Some rank joins late or rejoins: the launcher starts processes during the run.
    bool active = false;
    /// The cluster file has churn at all (leave_at too): the peers get --job-start, so that
    /// every join_at, fail_at, rejoin_at and leave_at is on one clock.
    bool timed = false;
    std::vector<double> join_at, fail_at, rejoin_at;  ///< per rank; infinity: never
    /// Ranks present at t = 0 (join_at 0): rank 0's --min-peers.
    int present_at_start() const;
};

/// The plan of `cluster` (null: no churn) for n ranks.
ChurnPlan churn_plan(const Cluster* cluster, int n);

/// One rank's processes during a launch.
struct RankRun {
    int child = -1;                  ///< its last process in Children; -1: not started
    int processes = 0;               ///< started so far
    int joins = 0;                   ///< of them, started with --join (late join, rejoin)
    bool joining = false;            ///< its last process was started with --join
    bool restarted = false;          ///< came back after its failure time already
    std::optional<double> start_at;  ///< job time of its next start; none: nothing pending
    bool exit_seen = false;          ///< the last process's exit was acted on
    /// {process, exit, steps, log, bytes_sent} of each earlier process.
    json::Json earlier = json::Json::array();
    std::int64_t earlier_steps = 0;
    double earlier_bytes = 0;
    std::string never;  ///< why a pending start never happened ("" when it did)
};

/// Moves rank r's files of its process k in `dir` (peer<r>.log, .jsonl, .trace.json) to
/// peer<r>.<k>.*, so that the names without a number are always the rank's last process's;
/// returns the log's new path.
std::filesystem::path archive_process(const std::filesystem::path& dir, int r, int k,
                                      const std::optional<std::filesystem::path>& trace);

/// "rank 3 joins at 2 s, rank 2 rejoins at 4 s": the pending starts, for the progress line.
std::string pending_text(const std::vector<RankRun>& ranks);

}  // namespace gossamer::launch
