#pragma once
/// What building a topology costs, known from n and the edge counts before anything is built
/// (docs/modules/topology.md, "Sizes"). A complete graph of 10,000 peers is 10^8 directed edges:
/// its graph and weights took 5 GB and most of a minute, and 36,000 peers exhausted the memory; the
/// loaders estimate first and refuse with one line instead.

#include <cstdint>
#include <string>
#include <string_view>

#include "gossamer/topology/schedule.hpp"

namespace gossamer::topology {

/// The size of a topology to build.
struct BuildSize {
    int n = 0;
    double round_edges = 0;  ///< directed edges of the largest round
    double total_edges = 0;  ///< directed edges of every round kept, summed
    double pairs = 0;        ///< pairs a generator visits per draw (erdos_renyi: n(n-1)/2), else 0
};

/// The most directed edges one round may have: a graph indexes its edges with int.
inline constexpr double kMaxRoundEdges = 2147483647.0;
/// The most pairs a generator may visit (erdos_renyi draws every pair: about 10 s at this bound).
inline constexpr double kMaxGeneratorPairs = 2147483647.0;

/// The size of what generate(spec) builds, from spec alone (nothing is allocated). A random
/// schedule counts one round (it builds its rounds on demand).
BuildSize family_size(const FamilySpec& spec);

/// About the bytes building a topology of `size` takes at its peak: every round's graph and
/// weights (32 bytes an edge, kept), and the lists the largest round is built from (another
/// 16 bytes an edge, freed once it is built).
double build_bytes(const BuildSize& size);

/// Throws ConfigError(file, path, problem, fix) when a round would exceed kMaxRoundEdges, a
/// generator kMaxGeneratorPairs, or build_bytes() the memory the machine leaves
/// (gossamer::check_memory). `what` names the topology, e.g. "complete (n = 36000)".
void check_build_size(const BuildSize& size, std::string_view what, const std::string& file,
                      const std::string& path, std::string_view fix);

}  // namespace gossamer::topology
