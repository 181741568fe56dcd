#include "gossamer/topology/build_size.hpp"

#include <fmt/format.h>

#include "gossamer/core/error.hpp"
#include "gossamer/core/memory.hpp"
#include "gossamer/topology/generators.hpp"

namespace gossamer::topology {
namespace {

// Bytes per directed edge (measured: topo validate of a complete graph of 4,000 peers, 1.6e7
// edges, keeps 759 MB at most: 47 bytes an edge).
// Kept: the graph's sorted edge (8) and its two adjacency entries (4 + 4), the weight entry
// (16). While a round is built: the generator's pair list and the weights' triplets.
constexpr double kKeptPerEdge = 32;
constexpr double kBuildPerEdge = 16;
constexpr double kPerPeer = 64;  // offsets, degrees, the self weight

// Hops 1, 2, 4, ... below n.
double hops(int n) {
    return n > 1 ? floor_log2(n - 1) + 1 : 0;
}

}  // namespace

BuildSize family_size(const FamilySpec& s) {
    const double n = s.n;
    BuildSize out;
    out.n = s.n;
    const std::string& f = s.family;
    double round = 0, rounds = 1;
    if (f == "ring")
        round = n > 2 ? 2 * n : 2 * (n - 1);
    else if (f == "torus")
        round = 4 * n;
    else if (f == "hypercube")
        round = n * hops(s.n);
    else if (f == "complete")
        round = n * (n - 1);
    else if (f == "star")
        round = 2 * (n - 1);
    else if (f == "exponential")
        round = n * hops(s.n);
    else if (f == "symmetric_exponential")
        round = 2 * n * hops(s.n);
    else if (f == "one_peer_exponential") {
        round = n;
        rounds = n > 1 ? floor_log2(s.n) : 1;
    } else if (f == "random_matching")
        round = n;
    else if (f == "erdos_renyi") {
        round = s.p * n * (n - 1);
        out.pairs = n * (n - 1) / 2;
    }
    out.round_edges = round;
    out.total_edges = round * rounds;
    return out;
}

double build_bytes(const BuildSize& s) {
    return s.total_edges * kKeptPerEdge + s.round_edges * kBuildPerEdge +
           static_cast<double>(s.n) * kPerPeer;
}

void check_build_size(const BuildSize& s, std::string_view what, const std::string& file,
                      const std::string& path, std::string_view fix) {
    // Both bounds are known from n alone: the refusal comes before anything is allocated.
    if (s.round_edges > kMaxRoundEdges)
        throw ConfigError(file, path,
                          fmt::format("{} has {:.0f} directed edges in one round, more than the "
                                      "{:.0f} a round can hold",
                                      what, s.round_edges, kMaxRoundEdges),
                          std::string(fix));
    if (s.pairs > kMaxGeneratorPairs)
        throw ConfigError(file, path,
                          fmt::format("{} draws each of its {:.0f} pairs, more than the {:.0f} a "
                                      "generator may visit",
                                      what, s.pairs, kMaxGeneratorPairs),
                          std::string(fix));
    check_memory(build_bytes(s), fmt::format("{} ({:.0f} directed edges)", what, s.total_edges),
                 file, path, fix);
}

}  // namespace gossamer::topology
