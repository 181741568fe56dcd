#include "gossamer/topology/generators.hpp"

#include <fmt/format.h>

#include <cmath>
#include <numeric>

#include "gossamer/core/error.hpp"
#include "gossamer/core/rng.hpp"

namespace gossamer::topology {
namespace {

void require_n(int n, int min, const char* family) {
    if (n < min)
        throw TopologyError(fmt::format("{} needs at least {} peer{}, got n = {}", family, min,
                                        min == 1 ? "" : "s", n));
}

void require_power_of_two(int n, const char* family) {
    require_n(n, 1, family);
    if (!is_power_of_two(n)) {
        const int lower = 1 << floor_log2(n);
        throw TopologyError(
            fmt::format("{} needs n to be a power of two, got n = {}; use n = {} or n = {}", family,
                        n, lower, lower * 2));
    }
}

}  // namespace

int floor_log2(std::int64_t n) noexcept {
    int k = 0;
    while ((std::int64_t{1} << (k + 1)) <= n) ++k;
    return k;
}

bool is_power_of_two(std::int64_t n) noexcept {
    return n >= 1 && (n & (n - 1)) == 0;
}

std::pair<int, int> square_factors(int n) noexcept {
    int rows = static_cast<int>(std::sqrt(static_cast<double>(n)));
    while (rows > 1 && n % rows != 0) --rows;
    return {std::max(rows, 1), n / std::max(rows, 1)};
}

Digraph ring(int n) {
    require_n(n, 1, "ring");
    std::vector<std::pair<int, int>> pairs;
    for (int i = 0; i < n && n > 1; ++i) pairs.emplace_back(i, (i + 1) % n);
    return Digraph::undirected(n, pairs);
}

Digraph torus(int rows, int cols) {
    if (rows < 1 || cols < 1)
        throw TopologyError(
            fmt::format("torus needs rows >= 1 and cols >= 1, got {} x {}", rows, cols));
    const int n = rows * cols;
    std::vector<std::pair<int, int>> pairs;
    for (int r = 0; r < rows; ++r) {
        for (int c = 0; c < cols; ++c) {
            const int i = r * cols + c;
            const int right = r * cols + (c + 1) % cols;
            const int down = ((r + 1) % rows) * cols + c;
            if (right != i) pairs.emplace_back(i, right);
            if (down != i) pairs.emplace_back(i, down);
        }
    }
    return Digraph::undirected(n, pairs);
}

Digraph hypercube(int n) {
    require_power_of_two(n, "hypercube");
    std::vector<std::pair<int, int>> pairs;
    for (int i = 0; i < n; ++i)
        for (int bit = 1; bit < n; bit <<= 1)
            if ((i ^ bit) > i) pairs.emplace_back(i, i ^ bit);
    return Digraph::undirected(n, pairs);
}

Digraph complete(int n) {
    require_n(n, 1, "complete");
    std::vector<std::pair<int, int>> pairs;
    pairs.reserve(static_cast<std::size_t>(n) * static_cast<std::size_t>(n - 1) / 2);
    for (int i = 0; i < n; ++i)
        for (int j = i + 1; j < n; ++j) pairs.emplace_back(i, j);
    return Digraph::undirected(n, pairs);
}

Digraph star(int n) {
    require_n(n, 1, "star");
    std::vector<std::pair<int, int>> pairs;
    for (int i = 1; i < n; ++i) pairs.emplace_back(0, i);
    return Digraph::undirected(n, pairs);
}

Digraph exponential(int n) {
    require_n(n, 1, "exponential");
    std::vector<Edge> edges;
    for (int i = 0; i < n; ++i)
        for (int hop = 1; hop < n; hop <<= 1) edges.push_back({i, (i + hop) % n});
    return Digraph(n, std::move(edges));
}

Digraph symmetric_exponential(int n) {
    Digraph d = exponential(n);
    std::vector<Edge> edges = d.edges();
    for (const auto& e : d.edges()) edges.push_back({e.to, e.from});
    return Digraph(n, std::move(edges));
}

Digraph one_peer_exponential(int n, std::int64_t t) {
    require_power_of_two(n, "one_peer_exponential");
    if (n == 1) return Digraph(1, {});
    const int tau = floor_log2(n);
    const int hop = 1 << static_cast<int>(((t % tau) + tau) % tau);
    std::vector<Edge> edges;
    edges.reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) edges.push_back({i, (i + hop) % n});
    return Digraph(n, std::move(edges));
}

Digraph random_matching(int n, std::uint64_t seed, std::int64_t t) {
    require_n(n, 1, "random_matching");
    Rng rng(derive_seed(seed, static_cast<std::uint64_t>(t)));
    std::vector<int> order(static_cast<std::size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
    std::vector<std::pair<int, int>> pairs;
    for (std::size_t i = 0; i + 1 < order.size(); i += 2)
        pairs.emplace_back(order[i], order[i + 1]);
    return Digraph::undirected(n, pairs);
}

Digraph erdos_renyi(int n, double p, std::uint64_t seed) {
    require_n(n, 1, "erdos_renyi");
    if (!(p >= 0.0 && p <= 1.0))
        throw TopologyError(fmt::format("erdos_renyi needs 0 <= p <= 1, got p = {}", p));
    constexpr int kAttempts = 100;
    for (int attempt = 0; attempt < kAttempts; ++attempt) {
        Rng rng(derive_seed(seed, static_cast<std::uint64_t>(attempt)));
        std::vector<std::pair<int, int>> pairs;
        for (int i = 0; i < n; ++i)
            for (int j = i + 1; j < n; ++j)
                if (rng.uniform() < p) pairs.emplace_back(i, j);
        Digraph g = Digraph::undirected(n, pairs);
        if (strongly_connected(g)) return g;
    }
    // G(n, p) is connected with high probability once p exceeds ln(n)/n.
    const double suggest = std::min(1.0, 2.0 * std::log(std::max(n, 2)) / n);
    throw TopologyError(fmt::format(
        "erdos_renyi with n = {} and p = {} was not connected in {} draws from seed {}; use p "
        ">= {:.3g}",
        n, p, kAttempts, seed, suggest));
}

}  // namespace gossamer::topology
