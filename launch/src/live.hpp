#pragma once
// gossamer launch's live view (docs/operations/report.md, "Live view"): the slowest peer and the
// edge most waited on for the progress line, and a compact per-peer table (--live), from the peers'
// metrics files as they grow (metrics_follow.hpp).

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "metrics_follow.hpp"

namespace gossamer::launch {

/// "slowest peer 0 at 12 steps (0.160 s/step), most waited on: 0->1 (3.2 s)": J->I, the edge
/// whose messages ended the most seconds of I's waits.
inline std::string live_fragment(const std::vector<Follower>& peers) {
    if (peers.empty()) return "";
    // Fewest steps; among peers level with it (synchronous protocols keep them in step), the
    // one whose steps take longest.
    const auto per_step = [](const Follower& f) {
        return f.steps > 0 ? f.busy / static_cast<double>(f.steps) : 0.0;
    };
    // A rank not started yet (the cluster file's join_at: no metrics file) is not slow.
    std::size_t slow = 0;
    while (slow + 1 < peers.size() && peers[slow].path.empty()) ++slow;
    for (std::size_t r = slow + 1; r < peers.size(); ++r)
        if (!peers[r].path.empty() &&
            (peers[r].steps < peers[slow].steps ||
             (peers[r].steps == peers[slow].steps && per_step(peers[r]) > per_step(peers[slow]))))
            slow = r;
    const auto& s = peers[slow];
    std::string out = fmt::format("slowest peer {} at {} steps", slow, s.steps);
    if (s.steps > 0) out += fmt::format(" ({:.3f} s/step)", s.busy / static_cast<double>(s.steps));
    int from = -1, to = -1;
    double most = 0;
    for (std::size_t r = 0; r < peers.size(); ++r)
        for (const auto& [j, w] : peers[r].waited)
            if (w > most) most = w, from = j, to = static_cast<int>(r);
    if (from >= 0) out += fmt::format(", most waited on: {}->{} ({:.1f} s)", from, to, most);
    return out;
}

/// The per-peer table: steps, seconds a step, idle share and whom it waited for most.
inline std::vector<std::string> live_table(const std::vector<Follower>& peers) {
    std::vector<std::string> lines = {fmt::format("{:>5} {:>7} {:>8} {:>6}  {}", "peer", "steps",
                                                  "s/step", "idle", "waits most for")};
    for (std::size_t r = 0; r < peers.size(); ++r) {
        const auto& p = peers[r];
        int top = -1;
        double most = 0;
        for (const auto& [j, w] : p.waited)
            if (w > most) most = w, top = j;
        const double total = p.busy + p.idle;
        lines.push_back(fmt::format(
            "{:>5} {:>7} {:>8} {:>6}  {}", r, p.steps,
            p.steps > 0 ? fmt::format("{:.3f}", p.busy / static_cast<double>(p.steps)) : "-",
            total > 0 ? fmt::format("{:.0f}%", 100 * p.idle / total) : "-",
            top >= 0 ? fmt::format("peer {} ({:.1f} s)", top, most) : "-"));
    }
    return lines;
}

/// Shows the table on stderr: on a terminal redrawn in place every half second, else as plain
/// lines every `plain_interval` seconds.
class LiveTable {
  public:
    explicit LiveTable(double plain_interval = 5.0)
        : tty_(::isatty(STDERR_FILENO) == 1), interval_(tty_ ? 0.5 : plain_interval) {}
    void show(const std::vector<std::string>& lines, double now, bool force = false) {
        if (!force && now - last_ < interval_) return;
        last_ = now;
        std::string out;
        if (tty_ && drawn_ > 0) out += fmt::format("\x1b[{}F\x1b[J", drawn_);  // up, clear
        for (const auto& l : lines) out += l + "\n";
        if (!tty_) out += "\n";
        std::fputs(out.c_str(), stderr);
        std::fflush(stderr);
        drawn_ = tty_ ? static_cast<int>(lines.size()) : 0;
    }
    bool tty() const noexcept { return tty_; }

  private:
    bool tty_;
    double interval_;
    double last_ = -1e300;
    int drawn_ = 0;
};

}  // namespace gossamer::launch
