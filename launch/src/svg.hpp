#pragma once
// Inline SVG drawings for gossamer report (docs/operations/report.md): line charts, bar charts, a
// heatmap and a topology drawing, each a self-contained <svg> element (no script, no external
// font).

#include <string>
#include <utility>
#include <vector>

namespace gossamer::launch::svg {

struct Series {
    std::string name;
    std::vector<std::pair<double, double>> points;  ///< (x, y), x ascending
};

/// A line chart of the series (one colour each, a legend); an empty chart says "no data".
std::string line_chart(const std::string& title, const std::string& x_label,
                       const std::string& y_label, const std::vector<Series>& series);

/// Grouped bars: values[g][i] is group g's bar for category i (peers); one colour per group.
std::string bar_chart(const std::string& title, const std::string& y_label,
                      const std::vector<std::string>& groups,
                      const std::vector<std::vector<double>>& values);

/// A matrix as coloured cells (row: sender, column: receiver), the values in the tooltips; a
/// NaN is drawn grey as "no edge" (class "cell none").
std::string heatmap(const std::string& title, const std::string& unit,
                    const std::vector<std::vector<double>>& m);

/// Peers on a circle, directed edges as arrows (a pair both ways as one line).
std::string graph(const std::string& title, int n, const std::vector<std::pair<int, int>>& edges);

/// One bar of a timeline: [start, end) in seconds, a kind (0 step, 1 wait) and a tooltip.
struct Span {
    double start = 0, end = 0;
    int kind = 0;
    std::string label;
};

/// A timeline: one row per peer (lanes[r]), steps and waits as bars on one time axis.
std::string timeline(const std::string& title, const std::vector<std::vector<Span>>& lanes);

/// Text with <, >, &, " escaped for HTML and SVG.
std::string escape(const std::string& s);

}  // namespace gossamer::launch::svg
