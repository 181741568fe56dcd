#pragma once
/// gossamer report: one self-contained HTML page from a run folder of gossamer sim or gossamer
/// launch (docs/operations/report.md): the comparison table, accuracy and loss against time and
/// against bytes, idle per peer, the topology, a per-edge heatmap of bytes and links to the
/// timelines. Everything is inline (SVG, CSS); the page loads nothing.

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace gossamer::launch {

struct ReportOptions {
    std::filesystem::path run;            ///< the run folder (gossamer sim/launch --out)
    std::filesystem::path out;            ///< the page; default RUN/report.html
    std::optional<std::string> topology;  ///< draw this topology file (default: launch's)
};

struct ReportSummary {
    std::string kind;  ///< "sim" or "launch"
    std::vector<std::string> algorithms;
    std::filesystem::path page;
    int charts = 0;                   ///< inline SVG drawings on the page
    std::vector<std::string> traces;  ///< timelines linked from the page
    std::vector<std::string> notes;   ///< what the page could not show, and why
};

/// Reads the run folder and writes the page. Throws ConfigError naming the folder when it is
/// not a run folder of gossamer sim or launch, or naming the page when it cannot be written.
ReportSummary write_report(const ReportOptions& options);

}  // namespace gossamer::launch
