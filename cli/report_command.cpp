// gossamer report: one HTML page from a run folder (docs/operations/report.md).
#include <fmt/format.h>

#include <iostream>

#include "args.hpp"
#include "commands.hpp"
#include "gossamer/core/json.hpp"
#include "gossamer/launch/report.hpp"

namespace gossamer::cli {

int run_report(const std::vector<std::string>& args) {
    ArgParser p("gossamer report", "RUN [options]",
                "Writes one self-contained HTML page (inline SVG, nothing loaded from elsewhere) "
                "from the --out folder RUN of gossamer sim or gossamer launch: the comparison "
                "table, accuracy and loss against time and against bytes, idle per peer, the "
                "topology, bytes per edge (from the timelines of --trace) and links to the "
                "timelines.",
                {{"out", "FILE", "the page (default RUN/report.html)"},
                 {"topology", "FILE", "draw this topology (default: the one launch recorded)"},
                 {"json", "", "print what was written as JSON"}},
                1);
    auto a = p.parse(args);
    if (a.help) return std::cout << p.help(), 0;
    launch::ReportOptions o;
    o.run = a.positional.at(0);
    if (auto out = a.value("out")) o.out = *out;
    o.topology = a.value("topology");
    const auto r = launch::write_report(o);
    if (a.flag("json")) {
        std::cout << json::Json{{"page", r.page.string()},    {"kind", r.kind},
                                {"algorithms", r.algorithms}, {"charts", r.charts},
                                {"traces", r.traces},         {"notes", r.notes}}
                         .dump(2)
                  << "\n";
        return 0;
    }
    std::cout << fmt::format("report: {} ({} run, {} algorithm{}, {} charts, {} timeline{})\n",
                             r.page.string(), r.kind, r.algorithms.size(),
                             r.algorithms.size() == 1 ? "" : "s", r.charts, r.traces.size(),
                             r.traces.size() == 1 ? "" : "s");
    for (const auto& n : r.notes) std::cout << "  not shown: " << n << "\n";
    return 0;
}

}  // namespace gossamer::cli
