#include "churn.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <system_error>

#include "gossamer/core/cluster.hpp"
#include "gossamer/core/error.hpp"

namespace gossamer::launch {

namespace fs = std::filesystem;

int ChurnPlan::present_at_start() const {
    return static_cast<int>(std::count(join_at.begin(), join_at.end(), 0.0));
}

ChurnPlan churn_plan(const Cluster* cluster, int n) {
    ChurnPlan plan;
    constexpr double never = std::numeric_limits<double>::infinity();
    plan.join_at.assign(static_cast<std::size_t>(n), 0.0);
    plan.fail_at.assign(static_cast<std::size_t>(n), never);
    plan.rejoin_at.assign(static_cast<std::size_t>(n), never);
    if (!cluster) return plan;
    plan.timed = cluster->has_churn();
    for (int r = 0; r < n; ++r) {
        const auto& p = cluster->peers[static_cast<std::size_t>(r)];
        const auto i = static_cast<std::size_t>(r);
        plan.join_at[i] = p.join_at;
        plan.fail_at[i] = p.fail_at;
        plan.rejoin_at[i] = p.rejoin_at;
        plan.active = plan.active || p.join_at > 0 || std::isfinite(p.rejoin_at);
    }
    return plan;
}

void check_churn(const LaunchJob& job, bool inproc, bool resume) {
    const ChurnPlan plan = churn_plan(job.cluster.get(), job.topology.n());
    const std::string file = job.cluster_path.value_or("");
    // Threads: no --join, and the exact average of a job whose peer left is not built there.
    if (plan.timed && inproc)
        throw ConfigError("", "--inproc",
                          fmt::format("the cluster file {} has churn (join_at, leave_at or "
                                      "rejoin_at), which the launcher follows with gossamer peer "
                                      "processes only",
                                      file),
                          "leave out --inproc");
    if (!plan.active) return;
    const std::string why = fmt::format(
        "the cluster file {} starts peers late (join_at) or again after a failure (rejoin_at)",
        file);
    if (job.script)
        throw ConfigError("", "--script", why + ", which a --script peer cannot follow",
                          "leave out --script, or the cluster's join_at and rejoin_at");
    if (plan.join_at[0] > 0)
        throw ConfigError(file, "peers",
                          fmt::format("rank 0 joins at {:g} s, but rank 0 is the job's "
                                      "rendezvous and starts it (docs/modules/bootstrap.md)",
                                      plan.join_at[0]),
                          "drop rank 0's join_at and let another rank join late");
    if (resume)
        throw ConfigError("", "--resume", why + ", and a resumed job cannot be joined yet",
                          "launch it afresh, or drop the cluster's join_at and rejoin_at");
}

fs::path archive_process(const fs::path& dir, int r, int k, const std::optional<fs::path>& trace) {
    const auto move = [](const fs::path& from, const fs::path& to) {
        std::error_code ec;
        if (fs::exists(from, ec)) fs::rename(from, to, ec);
    };
    const auto log = dir / fmt::format("peer{}.{}.log", r, k);
    move(dir / fmt::format("peer{}.log", r), log);
    move(dir / fmt::format("peer{}.jsonl", r), dir / fmt::format("peer{}.{}.jsonl", r, k));
    if (trace) {
        auto to = *trace;
        to.replace_filename(fmt::format("peer{}.{}.trace.json", r, k));
        move(*trace, to);
    }
    return log;
}

std::string pending_text(const std::vector<RankRun>& ranks) {
    std::string out;
    for (std::size_t r = 0; r < ranks.size(); ++r)
        if (const auto& at = ranks[r].start_at)
            out += fmt::format("{}rank {} {} at {:g} s", out.empty() ? "" : ", ", r,
                               ranks[r].processes > 0 ? "rejoins" : "joins", *at);
    return out;
}

}  // namespace gossamer::launch
