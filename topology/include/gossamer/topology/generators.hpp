#pragma once
/// Graph families for n peers. Each function returns one round's graph; time-varying families
/// take the round t. All are pure functions of their arguments (seeded ones too), so they can
/// be tested exhaustively. Invalid parameters throw TopologyError with a suggested fix.

#include <cstdint>

#include "gossamer/topology/graph.hpp"

namespace gossamer::topology {

Digraph ring(int n);                   ///< undirected cycle i ~ i+1 (n = 2: one edge)
Digraph torus(int rows, int cols);     ///< undirected 2-D wrap-around grid, rows*cols peers
Digraph hypercube(int n);              ///< i ~ i xor 2^k; n a power of two
Digraph complete(int n);               ///< every pair
Digraph star(int n);                   ///< peer 0 ~ every other peer
Digraph exponential(int n);            ///< directed i -> i + 2^k mod n for every 2^k < n
Digraph symmetric_exponential(int n);  ///< the undirected version of exponential(n)
/// Directed, time-varying: in round t peer i sends to i + 2^(t mod log2 n) mod n. n a power of 2.
Digraph one_peer_exponential(int n, std::int64_t t);
/// A random perfect matching for round t (one peer left out when n is odd); seeded, no period.
Digraph random_matching(int n, std::uint64_t seed, std::int64_t t);
/// Undirected G(n, p), redrawn (up to 100 times, deterministically from the seed) until it is
/// connected; throws TopologyError naming a p that works when no draw is connected.
Digraph erdos_renyi(int n, double p, std::uint64_t seed);

/// floor(log2(n)) for n >= 1; is_power_of_two(n) for n >= 1.
int floor_log2(std::int64_t n) noexcept;
bool is_power_of_two(std::int64_t n) noexcept;
/// The most square rows x cols factorisation of n (rows <= cols).
std::pair<int, int> square_factors(int n) noexcept;

}  // namespace gossamer::topology
