#include "gossamer/topology/graph.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/strong_components.hpp>

#include "gossamer/core/error.hpp"

namespace gossamer::topology {
namespace {

// Compressed adjacency: ptr[i]..ptr[i+1] index into adj.
void build_csr(int n, const std::vector<Edge>& edges, bool by_from, std::vector<int>& ptr,
               std::vector<int>& adj) {
    ptr.assign(static_cast<std::size_t>(n) + 1, 0);
    for (const auto& e : edges) ++ptr[static_cast<std::size_t>(by_from ? e.from : e.to) + 1];
    for (int i = 0; i < n; ++i) ptr[i + 1] += ptr[i];
    adj.resize(edges.size());
    std::vector<int> fill(ptr.begin(), ptr.end() - 1);
    for (const auto& e : edges) {
        int key = by_from ? e.from : e.to;
        adj[static_cast<std::size_t>(fill[key]++)] = by_from ? e.to : e.from;
    }
    for (int i = 0; i < n; ++i) std::sort(adj.begin() + ptr[i], adj.begin() + ptr[i + 1]);
}

}  // namespace

Digraph::Digraph(int n, std::vector<Edge> edges) : n_(n), edges_(std::move(edges)) {
    if (n < 1) throw TopologyError(fmt::format("a graph needs at least one peer, got n = {}", n));
    for (const auto& e : edges_) {
        if (e.from < 0 || e.from >= n || e.to < 0 || e.to >= n)
            throw TopologyError(
                fmt::format("edge {} -> {} is out of range for n = {}", e.from, e.to, n));
        if (e.from == e.to)
            throw TopologyError(fmt::format("self-loop {} -> {} is not an edge", e.from, e.to));
    }
    std::sort(edges_.begin(), edges_.end());
    edges_.erase(std::unique(edges_.begin(), edges_.end()), edges_.end());
    build_csr(n_, edges_, true, out_ptr_, out_adj_);
    build_csr(n_, edges_, false, in_ptr_, in_adj_);
}

Digraph Digraph::undirected(int n, const std::vector<std::pair<int, int>>& pairs) {
    std::vector<Edge> edges;
    edges.reserve(pairs.size() * 2);
    for (auto [a, b] : pairs) {
        edges.push_back({a, b});
        edges.push_back({b, a});
    }
    return Digraph(n, std::move(edges));
}

std::span<const int> Digraph::out_neighbors(int i) const {
    return {out_adj_.data() + out_ptr_[i], out_adj_.data() + out_ptr_[i + 1]};
}

std::span<const int> Digraph::in_neighbors(int i) const {
    return {in_adj_.data() + in_ptr_[i], in_adj_.data() + in_ptr_[i + 1]};
}

bool Digraph::has_edge(int from, int to) const {
    auto out = out_neighbors(from);
    return std::binary_search(out.begin(), out.end(), to);
}

bool Digraph::symmetric() const {
    return std::all_of(edges_.begin(), edges_.end(),
                       [this](const Edge& e) { return has_edge(e.to, e.from); });
}

Digraph graph_union(std::span<const Digraph* const> graphs) {
    if (graphs.empty()) throw TopologyError("union of no graphs");
    const int n = graphs.front()->n();
    std::vector<Edge> all;
    for (const Digraph* g : graphs) {
        if (g->n() != n) throw TopologyError("union of graphs with different peer counts");
        all.insert(all.end(), g->edges().begin(), g->edges().end());
    }
    return Digraph(n, std::move(all));
}

int strong_component_count(const Digraph& g) {
    using BGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;
    BGraph bg(static_cast<std::size_t>(g.n()));
    for (const auto& e : g.edges()) boost::add_edge(e.from, e.to, bg);
    std::vector<int> component(static_cast<std::size_t>(g.n()));
    return boost::strong_components(
        bg,
        boost::make_iterator_property_map(component.begin(), boost::get(boost::vertex_index, bg)));
}

bool strongly_connected(const Digraph& g) {
    return strong_component_count(g) == 1;
}

}  // namespace gossamer::topology
