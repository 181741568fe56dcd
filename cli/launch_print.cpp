// gossamer launch's table (launch_print.hpp).
#include "launch_print.hpp"

#include <fmt/format.h>

#include <optional>

#include "gossamer/core/text_metrics.hpp"

namespace gossamer::cli {
namespace {

// The time-to-target column (empty without a target): "—" when never reached.
std::string target_header(std::optional<double> target, bool loss) {
    if (!target) return "";
    return loss ? fmt::format("time to loss {:g} ", *target)
                : fmt::format("time to {:.1f}% ", 100 * *target);
}
std::string target_cell(std::optional<double> target, std::optional<double> time) {
    if (!target) return "";
    return time ? fmt::format("{:.2f} ", *time) : "— ";
}

}  // namespace

std::string launch_table(const launch::LaunchJob& job, const std::vector<launch::LaunchRow>& rows) {
    // A language model (text data): bits per character instead of an accuracy; its loss is in
    // nats per character.
    std::string table =
        fmt::format("{:<10} {:>15}{:>9} {:>9} {:>15} {:>12} {:>12} {:>8} {:>6}\n", "algorithm",
                    target_header(job.target, job.target_is_loss), "time [s]", "wall [s]",
                    job.text ? "final bpc" : "final acc [%]", job.text ? "nats/char" : "final loss",
                    "MB sent/peer", "idle", "lost");
    for (const auto& row : rows) {
        const std::string first =
            job.text
                ? (row.loss ? fmt::format("{:.4f}", text_metrics::bits_per_char(*row.loss)) : "-")
                : (row.accuracy ? fmt::format("{:.2f}", 100 * *row.accuracy) : "-");
        table +=
            fmt::format("{:<10} {:>15}{:>9.2f} {:>9.2f} {:>15} {:>12} {:>12.2f} {:>8} {:>6}\n",
                        row.algorithm, target_cell(job.target, row.time_to_target), row.train,
                        row.wall, first, row.loss ? fmt::format("{:.4f}", *row.loss) : "-",
                        row.mb_per_peer, fmt::format("{:.1f}%", 100 * row.idle_share),
                        row.diverged ? fmt::format("{} ({} diverged)", row.failed, row.diverged)
                                     : fmt::format("{}", row.failed));
    }
    return table;
}

}  // namespace gossamer::cli
