#include "gossamer/topology/export.hpp"

#include <fmt/format.h>

namespace gossamer::topology {

std::string to_dot(const Round& round, std::string_view graph_name) {
    const Digraph& g = round.graph;
    const MixingMatrix& w = round.weights;
    const bool undirected = g.symmetric() && w.symmetric();
    std::string out = fmt::format("{} \"{}\" {{\n", undirected ? "graph" : "digraph", graph_name);
    out += "  node [shape=circle];\n";
    for (int i = 0; i < g.n(); ++i)
        out += fmt::format("  {} [label=\"{}\\n{:.3g}\"];\n", i, i, w.at(i, i));
    for (const auto& e : g.edges()) {
        if (undirected && e.from > e.to) continue;
        out += fmt::format("  {} {} {} [label=\"{:.3g}\"];\n", e.from, undirected ? "--" : "->",
                           e.to, w.at(e.to, e.from));
    }
    out += "}\n";
    return out;
}

std::string to_csv(const MixingMatrix& w) {
    std::string out;
    for (int i = 0; i < w.n(); ++i) {
        for (int j = 0; j < w.n(); ++j) {
            if (j) out += ',';
            const double v = w.at(i, j);
            out += v == 0.0 ? std::string("0") : fmt::format("{:.17g}", v);
        }
        out += '\n';
    }
    return out;
}

}  // namespace gossamer::topology
