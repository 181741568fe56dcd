#pragma once
/// A directed graph on peers 0..n-1: an edge (from, to) means `from` sends to `to`.
/// Undirected graphs are stored with both directions. Self-loops are not edges (the self weight
/// lives in the mixing matrix). Boost.Graph is used inside topology/ only, never in this header.

#include <span>
#include <utility>
#include <vector>

namespace gossamer::topology {

struct Edge {
    int from;  ///< sender
    int to;    ///< receiver
    friend bool operator==(const Edge&, const Edge&) = default;
    friend auto operator<=>(const Edge&, const Edge&) = default;
};

class Digraph {
  public:
    Digraph() = default;
    /// Builds a graph on n peers. Duplicate edges are merged; a self-loop or a rank outside
    /// [0, n) throws TopologyError (file loaders check these first to name the JSON path).
    Digraph(int n, std::vector<Edge> edges);
    /// Adds both directions of every pair.
    static Digraph undirected(int n, const std::vector<std::pair<int, int>>& pairs);

    int n() const noexcept { return n_; }
    /// Edges sorted by (from, to), without duplicates.
    const std::vector<Edge>& edges() const noexcept { return edges_; }
    std::span<const int> out_neighbors(int i) const;  ///< receivers of i, ascending
    std::span<const int> in_neighbors(int i) const;   ///< senders to i, ascending
    int out_degree(int i) const { return static_cast<int>(out_neighbors(i).size()); }
    int in_degree(int i) const { return static_cast<int>(in_neighbors(i).size()); }
    bool has_edge(int from, int to) const;
    /// True when every edge has its reverse (the graph is undirected).
    bool symmetric() const;

  private:
    int n_ = 0;
    std::vector<Edge> edges_;
    std::vector<int> out_ptr_, out_adj_, in_ptr_, in_adj_;
};

/// The union of several graphs on the same n peers.
Digraph graph_union(std::span<const Digraph* const> graphs);

/// Strong connectivity (Tarjan, through Boost.Graph). A graph of one peer is connected.
bool strongly_connected(const Digraph& g);
/// Number of strongly connected components.
int strong_component_count(const Digraph& g);

}  // namespace gossamer::topology
