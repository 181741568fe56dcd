// gossamer topo show|validate|gen|matrix|dot: topology files (gen: topo_gen_command.cpp).
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "args.hpp"
#include "commands.hpp"
#include "gossamer/core/log.hpp"
#include "gossamer/core/progress.hpp"
#include "gossamer/core/units.hpp"
#include "gossamer/topology/analysis.hpp"
#include "gossamer/topology/build_size.hpp"
#include "gossamer/topology/export.hpp"
#include "gossamer/topology/topology_file.hpp"
#include "topo_commands.hpp"

namespace gossamer::cli {

namespace {

namespace topo = gossamer::topology;

const char* kTopoHelp = R"(usage: gossamer topo COMMAND [options]

Topology files: load, validate, analyse, generate and export them.

commands:
  show FILE       analysis: connectivity, stochasticity, SLEM and spectral gap, rounds to
                  average to 1e-6, degrees, bytes per round (--json for one object)
  validate FILE   exit 0 if the file is valid, else one line with the reason and exit 2
  gen             write a generated family's topology file to stdout
  matrix FILE     the mixing matrix W of one round as CSV
  dot FILE        one round as Graphviz DOT, weights as edge labels

'gossamer topo COMMAND --help' describes each command. File format: docs/formats/topology-format.md.
)";

// Writes the averaging run of a schedule as CSV "round,disagreement" to dir/<stem>.csv.
// `max_rounds` is the report's: the work bound of a large n applies to the curve too.
void write_curve(const std::filesystem::path& dir, const std::string& file, const topo::Schedule& s,
                 std::int64_t max_rounds, const topo::AnalysisOptions& o) {
    const auto path = dir / (std::filesystem::path(file).stem().string() + ".csv");
    const auto tmp = path.string() + ".tmp";
    {
        std::ofstream out(tmp);
        if (!out) throw UsageError(fmt::format("--curve-dir: cannot write {}", path.string()));
        out << "round,disagreement\n";
        auto curve = topo::consensus_curve(s, std::min<std::int64_t>(max_rounds, 100000), o.seed,
                                           o.target * 1e-3);
        for (std::size_t t = 0; t < curve.size(); ++t) out << t << ',' << curve[t] << '\n';
        if (!out.flush())
            throw UsageError(fmt::format("--curve-dir: cannot write {}", path.string()));
    }
    std::filesystem::rename(tmp, path);  // whole file or nothing
}

int show(const std::vector<std::string>& args) {
    ArgParser p("gossamer topo show", "FILE... [options]",
                "Analyses topology files: strong connectivity per round and over one period, "
                "row/column stochasticity and symmetry of W, SLEM and spectral gap (of the "
                "product over one period for a time-varying schedule; estimated for a random "
                "one), the rounds an averaging run needs to shrink disagreement by 1e-6, degrees "
                "and the bytes each peer sends per round. With several files, one table row "
                "each (--json: an array).",
                {{"json", "", "print JSON (one object per file) instead of a table"},
                 {"model-bytes", "BYTES", "model size for the traffic figures (default 4MiB)"},
                 {"max-rounds", "N",
                  "cap on the averaging run (default 1000000, fewer for a large n so that the "
                  "run stays within a few seconds; the output says so; given, it is kept)"},
                 {"samples", "N", "rounds sampled for a random schedule (default 256)"},
                 {"seed", "S", "seed of the averaging run's start vector (default 1)"},
                 {"curve-dir", "DIR", "write each file's averaging run as DIR/<name>.csv"}},
                1, true);
    auto a = p.parse(args);
    if (a.help) return std::cout << p.help(), 0;
    topo::AnalysisOptions o;
    if (auto b = a.value("model-bytes")) {
        auto bytes = parse_bytes(*b);
        if (!bytes)
            throw UsageError(fmt::format(
                "--model-bytes: \"{}\" is not a size; write e.g. 4MiB, 100MB or 4096", *b));
        o.model_bytes = *bytes;
    }
    o.max_rounds = a.integer("max-rounds", o.max_rounds, 1, INT64_MAX);
    if (a.value("max-rounds")) o.max_work = 0;  // asked for: run that long, however large n is
    o.sample_rounds = a.integer("samples", o.sample_rounds, 1, 1 << 24);
    o.seed = static_cast<std::uint64_t>(a.integer("seed", 1, 0, INT64_MAX));
    const auto curve_dir = a.value("curve-dir");
    if (curve_dir) std::filesystem::create_directories(*curve_dir);
    // Load every file first: a bad one stops the command before any output.
    std::vector<topo::Topology> topologies;
    for (const auto& f : a.positional) topologies.push_back(topo::load_topology(f));
    Progress progress(0);  // analyses take seconds: a terminal shows stages, logs stay clean
    o.progress = [&progress](std::string_view stage) { progress(stage, true); };
    o.update = [&progress](std::string_view line) { progress(line); };
    std::vector<topo::Report> reports;
    for (const auto& t : topologies) {
        reports.push_back(topo::analyse(*t.schedule, o));
        if (curve_dir) write_curve(*curve_dir, t.source, *t.schedule, reports.back().max_rounds, o);
    }
    progress.done();
    if (a.flag("json")) {
        json::Json all = json::Json::array();
        for (std::size_t i = 0; i < reports.size(); ++i) {
            auto j = topo::to_json(reports[i]);
            j["file"] = a.positional[i];
            all.push_back(std::move(j));
        }
        std::cout << (all.size() == 1 ? all[0] : all).dump(2) << "\n";
    } else if (reports.size() == 1) {
        std::cout << a.positional[0] << ": " << topo::to_text(reports[0]);
    } else {
        std::cout << topo::to_comparison_table(a.positional, reports);
    }
    return 0;
}

int validate(const std::vector<std::string>& args) {
    ArgParser p("gossamer topo validate", "FILE",
                "Checks a topology file. Exit 0 if it is valid; otherwise prints one line naming "
                "the file, the JSON path, the problem and the fix, and exits with status 2.",
                {}, 1);
    auto a = p.parse(args);
    if (a.help) return std::cout << p.help(), 0;
    auto t = topo::load_topology(a.positional[0]);
    std::cout << fmt::format("{}: ok: {}, {} weights\n", a.positional[0], t.schedule->describe(),
                             topo::to_string(t.weights));
    return 0;
}

// matrix and dot: one round of a file.
int export_round(const std::vector<std::string>& args, bool dot) {
    ArgParser p(dot ? "gossamer topo dot" : "gossamer topo matrix", "FILE [--round T]",
                dot ? "Prints round T of the topology as Graphviz DOT, with W_ij as edge labels "
                      "and self weights in the node labels."
                    : "Prints the mixing matrix W of round T as CSV: row i is receiver i, column "
                      "j is sender j (x_i <- sum_j W_ij x_j).",
                {{"round", "T", "the round (default 0)"}}, 1);
    auto a = p.parse(args);
    if (a.help) return std::cout << p.help(), 0;
    const auto t = a.integer("round", 0, 0, INT64_MAX);
    auto topology = topo::load_topology(a.positional[0]);
    auto round = topology.schedule->at(t);
    if (dot)
        std::cout << topo::to_dot(*round,
                                  fmt::format("{} round {}", topology.schedule->describe(), t));
    else
        std::cout << topo::to_csv(round->weights);
    return 0;
}

}  // namespace

int run_topo(const std::vector<std::string>& args) {
    if (args.empty())  // usage errors go to stderr as one line, exit 2 (docs/operations/cli.md)
        throw UsageError(
            "gossamer topo: missing command; use show, validate, gen, matrix or dot (see 'gossamer "
            "topo --help')");
    if (args[0] == "--help" || args[0] == "-h" || args[0] == "help")
        return std::cout << kTopoHelp, 0;
    const std::vector<std::string> rest(args.begin() + 1, args.end());
    const std::string& cmd = args[0];
    if (cmd == "show") return show(rest);
    if (cmd == "validate") return validate(rest);
    if (cmd == "gen") return topo_gen(rest);
    if (cmd == "matrix") return export_round(rest, false);
    if (cmd == "dot") return export_round(rest, true);
    throw UsageError(fmt::format(
        "gossamer topo: unknown command '{}'; use show, validate, gen, matrix or dot", cmd));
}

}  // namespace gossamer::cli
