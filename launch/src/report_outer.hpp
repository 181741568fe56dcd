#pragma once
// gossamer report under "outer" (docs/operations/report.md, "Outer rounds"): the outer options
// and the rounds a run's records carry, shown with the run. Records: the peers' summary lines
// of gossamer launch (peer<r>.jsonl) and gossamer sim's peers.jsonl, which under "outer" hold
// "outer" (the options in one line), "steps" (rounds) and "inner_steps". Runs without "outer"
// have none of them, and their page is unchanged.

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "gossamer/core/json.hpp"
#include "svg.hpp"

namespace gossamer::launch {

struct OuterNote {
    std::string options;  ///< "H=8 nesterov lr=0.7 momentum=0.9"; "" without "outer"
    std::int64_t rounds = 0, inner_steps = 0;  ///< the most any peer took
};

/// Adds what one peer record says about the outer layer.
inline void note_outer(const json::Json& rec, OuterNote& o) {
    if (!rec.contains("outer") || !rec["outer"].is_string()) return;
    o.options = rec["outer"].get<std::string>();
    o.rounds = std::max<std::int64_t>(o.rounds, rec.value("steps", std::int64_t{0}));
    o.inner_steps =
        std::max<std::int64_t>(o.inner_steps, rec.value("inner_steps", std::int64_t{0}));
}

/// The page's "Outer rounds" section for the algorithms that ran with "outer" ("" for none).
template <class Algos>
std::string outer_section(const Algos& algos) {
    std::string rows;
    for (const auto& a : algos)
        if (!a.outer.options.empty())
            rows += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                                svg::escape(a.name), svg::escape(a.outer.options), a.outer.rounds,
                                a.outer.inner_steps);
    if (rows.empty()) return {};
    return "<h2>Outer rounds</h2>\n<table id=\"outer\">\n<tr><th>algorithm</th><th>outer "
           "(H inner steps a round, the outer optimizer)</th><th>rounds</th><th>inner steps"
           "</th></tr>\n" +
           rows + "</table>\n";
}

}  // namespace gossamer::launch
