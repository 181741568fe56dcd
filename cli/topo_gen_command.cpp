// gossamer topo gen: the topology file of a generated family, on stdout.
#include <fmt/format.h>

#include <iostream>

#include "args.hpp"
#include "gossamer/topology/build_size.hpp"
#include "gossamer/topology/generators.hpp"
#include "gossamer/topology/topology_file.hpp"
#include "topo_commands.hpp"

namespace gossamer::cli {
namespace {

namespace topo = gossamer::topology;

// Rank r listens on base + r: every port must fit in 65535. The message names the flags the
// user gave (a default --base-port is not the culprit) and the largest value that would fit.
void check_ports(int n, int base, bool base_given) {
    const std::int64_t last = static_cast<std::int64_t>(base) + n - 1;
    if (last <= 65535) return;
    const std::string range = fmt::format("peers on ports {}..{} exceed 65535", base, last);
    if (n > 65535)
        throw UsageError(fmt::format(
            "--n {}: {}; at most 65535 peers fit on one host's ports, lower --n", n, range));
    if (!base_given)
        throw UsageError(fmt::format(
            "--n {}: {} (rank r uses port {} + r, the default --base-port); lower --n to {} or "
            "less, or give --base-port {} or less",
            n, range, base, 65535 - base + 1, 65535 - n + 1));
    throw UsageError(
        fmt::format("--base-port {} with --n {}: {}; lower --base-port to {} or less, or --n to {} "
                    "or less",
                    base, n, range, 65535 - n + 1, 65535 - base + 1));
}

}  // namespace

int topo_gen(const std::vector<std::string>& args) {
    std::string families;
    for (auto f : topo::family_names()) families += (families.empty() ? "" : ", ") + std::string(f);
    ArgParser p(
        "gossamer topo gen", "--family F --n N [options]",
        "Writes the topology file of a generated family to stdout. Families: " + families + ".",
        {{"family", "F", "the graph family"},
         {"n", "N", "number of peers"},
         {"seed", "S", "seed for random_matching and erdos_renyi (default 1)"},
         {"rows", "R", "torus rows (default: most square)"},
         {"cols", "C", "torus columns"},
         {"p", "P", "erdos_renyi edge probability"},
         {"weights", "W", "uniform (default), metropolis_hastings, max_degree, push_sum"},
         {"host", "HOST", "host of every peer (default 127.0.0.1)"},
         {"base-port", "PORT", "port of rank 0; rank r uses PORT + r (default 29500)"}},
        0);
    auto a = p.parse(args);
    if (a.help) return std::cout << p.help(), 0;
    if (!a.value("family"))
        throw UsageError("gossamer topo gen: --family is required; families: " + families);
    if (!a.value("n")) throw UsageError("gossamer topo gen: --n is required (the number of peers)");
    topo::FamilySpec s;
    s.family = *a.value("family");
    if (!topo::is_family(s.family))
        throw UsageError(
            fmt::format("--family: unknown family \"{}\"; use one of {}", s.family, families));
    s.n = static_cast<int>(a.integer("n", 0, 1, 1 << 20));
    s.seed = static_cast<std::uint64_t>(a.integer("seed", 1, 0, INT64_MAX));
    s.rows = static_cast<int>(a.integer("rows", 0, 1, 1 << 20));
    s.cols = static_cast<int>(a.integer("cols", 0, 1, 1 << 20));
    s.p = a.number("p", s.family == "erdos_renyi" ? -1.0 : 0.0);
    if (s.family == "erdos_renyi" && !(s.p > 0.0 && s.p <= 1.0))
        throw UsageError("--p: erdos_renyi needs an edge probability 0 < p <= 1, e.g. --p 0.3");
    const std::string w = a.value("weights").value_or("uniform");
    auto rule = topo::parse_weight_rule(w);
    if (!rule || *rule == topo::WeightRule::explicit_weights)
        throw UsageError(
            fmt::format("--weights: unknown rule \"{}\"; use uniform, "
                        "metropolis_hastings, max_degree or push_sum",
                        w));
    s.weights = *rule;
    topo::LocalPeers peers;
    peers.host = a.value("host").value_or(peers.host);
    peers.base_port = static_cast<int>(a.integer("base-port", peers.base_port, 1, 65535));
    check_ports(s.n, peers.base_port, a.value("base-port").has_value());
    // What the family costs is known from --n: refused before anything is built.
    topo::check_build_size(topo::family_size(s),
                           fmt::format("the {} graph of {} peers", s.family, s.n), "", "--n",
                           "lower --n, or choose a sparse family (ring, torus, exponential)");
    try {
        (void)topo::generate(s);  // validates n, weights and connectivity before printing
    } catch (const TopologyError& e) {
        throw UsageError(fmt::format("gossamer topo gen: {}", e.what()));
    }
    std::cout << topo::family_topology_json(s, peers).dump(2) << "\n";
    return 0;
}

}  // namespace gossamer::cli
