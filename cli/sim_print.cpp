// gossamer sim's printing: progress lines after each run and the summary table.
#include "sim_print.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iostream>

#include "gossamer/core/text_metrics.hpp"

namespace gossamer::cli {
namespace {

std::string show(const sim::Stat& s, const char* fmt_mean, double scale = 1) {
    if (s.count == 0) return "-";
    std::string out = fmt::format(fmt::runtime(fmt_mean), s.mean * scale);
    if (s.count > 1) out += " ±" + fmt::format(fmt::runtime(fmt_mean), s.spread * scale);
    return out;
}

constexpr const char* kRow = "{:<10} {:>16} {:>15} {:>13} {:>11} {:>11} {:>12} {:>14} {:>8}\n";

}  // namespace

int peer_records_every(const std::optional<std::string>& value, int n) {
    const int sampled = (n + 1023) / 1024;  // about 1024 records
    if (!value) return n <= 4096 ? 1 : sampled;
    if (*value == "all") return 1;
    if (*value == "none") return 0;
    const std::string prefix = "sample ";
    if (value->rfind(prefix, 0) == 0) {
        const std::string k = value->substr(prefix.size());
        if (!k.empty() && k.size() <= 9 && k.find_first_not_of("0123456789") == std::string::npos) {
            const long long count = std::stoll(k);
            if (count >= 1)
                return static_cast<int>(std::max<long long>(1, (n + count - 1) / count));
        }
    }
    throw UsageError(fmt::format(
        "--peer-metrics: use all, none or \"sample K\" (K peers, K >= 1), not \"{}\"", *value));
}

void set_goal(sim::SweepSpec& spec, const ParsedArgs& a, const optim::TrainingConfig* cfg) {
    if (a.value("target") && a.value("target-loss"))
        throw UsageError("--target and --target-loss: give one time-to-target goal");
    // A flag wins over the config; of the config's, the accuracy.
    if (a.value("target")) {
        spec.goal = a.number("target", 0);
    } else if (a.value("target-loss")) {
        spec.goal = a.number("target-loss", 0);
        spec.goal_is_loss = true;
    } else if (cfg && cfg->target_accuracy) {
        spec.goal = *cfg->target_accuracy;
    } else if (cfg && cfg->target_loss) {
        spec.goal = *cfg->target_loss;
        spec.goal_is_loss = true;
    }
}

void print_run(const sim::RunReport& run, Progress& progress) {
    const auto& algo = run.algorithm;
    const auto& r = run.result;
    if (run.trace_path)
        progress(fmt::format("trace: {} ({} events, every {} step{})", *run.trace_path,
                             run.trace_events, run.trace_every, run.trace_every > 1 ? "s" : ""),
                 true);
    progress(
        fmt::format("{} seed {}: {} events in {:.1f} s ({:.0f} events/s)", algo, run.seed_index + 1,
                    r.events, r.wall_seconds, r.events / std::max(r.wall_seconds, 1e-9)),
        true);
    if (r.stopped_by_failure)
        std::cerr << fmt::format("{}: rank {} failed; all-reduce stops\n", algo,
                                 *r.stopped_by_failure);
    // The first seed's topology versions (all of them are in topology.jsonl).
    constexpr std::size_t kShownVersions = 12;
    if (run.seed_index != 0) return;
    for (std::size_t v = 0; v < r.topology_versions.size(); ++v) {
        if (v == kShownVersions) {
            progress(fmt::format("{}: {} more topology versions in topology.jsonl", algo,
                                 r.topology_versions.size() - v),
                     true);
            break;
        }
        const auto& tv = r.topology_versions[v];
        progress(fmt::format("{} at {:.2f} s: {}", algo, tv.time, tv.line), true);
    }
}

std::string sim_table(const std::vector<sim::AlgorithmSummary>& rows, double goal) {
    const bool has_goal = !std::isnan(goal);
    // A language model (text data) shows its loss in bits and nats per character instead of
    // accuracies; a loss target reads "time to loss X".
    const bool text = std::any_of(rows.begin(), rows.end(), [](const auto& s) { return s.text; });
    const bool loss_goal =
        std::any_of(rows.begin(), rows.end(), [](const auto& s) { return s.goal_is_loss; });
    std::string table =
        fmt::format(kRow, "algorithm",
                    !has_goal   ? "time [s]"
                    : loss_goal ? fmt::format("time to loss {:g}", goal)
                                : fmt::format("time to {:.1f}%", 100 * goal),
                    text ? "final bpc" : "final acc [%]", text ? "nats/char" : "min..max [%]",
                    "consensus", "samples/s", "MB sent/peer", "bwd GMAC/peer", "idle");
    for (const auto& s : rows) {
        const std::string time_col =
            has_goal ? (s.reached == s.seeds ? show(s.time_to_target, "{:.1f}")
                                             : fmt::format("{}/{} reached", s.reached, s.seeds))
                     : show(s.end_time, "{:.1f}");
        const auto& gmac = s.backward_gmac_per_peer;
        const std::string final_col =
            text ? show(s.final_loss, "{:.3f}", text_metrics::bits_per_char(1))
                 : show(s.final_accuracy, "{:.2f}", 100);
        const std::string spread_col =
            text                          ? show(s.final_loss, "{:.3f}")
            : s.final_accuracy.count == 0 ? "-"
                                          : fmt::format("{:.1f}..{:.1f}", 100 * s.min_accuracy.mean,
                                                        100 * s.max_accuracy.mean);
        table += fmt::format(kRow, s.algorithm, time_col, final_col, spread_col,
                             show(s.consensus, "{:.3g}"), show(s.samples_per_s, "{:.0f}"),
                             show(s.mb_sent_per_peer, "{:.1f}"),
                             gmac.count == 0 || gmac.mean == 0 ? "-" : show(gmac, "{:.1f}"),
                             fmt::format("{:.1f}%", 100 * s.idle_share.mean));
    }
    return table;
}

}  // namespace gossamer::cli
