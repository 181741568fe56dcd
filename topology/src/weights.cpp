#include "gossamer/topology/weights.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "gossamer/core/error.hpp"

namespace gossamer::topology {

std::string_view to_string(WeightKind kind) noexcept {
    return kind == WeightKind::averaging ? "averaging" : "push_sum";
}

std::string_view to_string(WeightRule rule) noexcept {
    switch (rule) {
        case WeightRule::uniform:
            return "uniform";
        case WeightRule::metropolis_hastings:
            return "metropolis_hastings";
        case WeightRule::max_degree:
            return "max_degree";
        case WeightRule::push_sum:
            return "push_sum";
        case WeightRule::explicit_weights:
            return "explicit";
    }
    return "?";
}

std::optional<WeightRule> parse_weight_rule(std::string_view name) noexcept {
    for (auto r : {WeightRule::uniform, WeightRule::metropolis_hastings, WeightRule::max_degree,
                   WeightRule::push_sum, WeightRule::explicit_weights})
        if (to_string(r) == name) return r;
    return std::nullopt;
}

WeightKind kind_of(WeightRule rule) noexcept {
    return rule == WeightRule::push_sum ? WeightKind::push_sum : WeightKind::averaging;
}

MixingMatrix::MixingMatrix(int n, std::vector<Triplet> entries) : n_(n) {
    for (const auto& t : entries)
        if (t.row < 0 || t.row >= n || t.col < 0 || t.col >= n)
            throw TopologyError(
                fmt::format("weight entry ({}, {}) out of range for n = {}", t.row, t.col, n));
    std::sort(entries.begin(), entries.end(), [](const Triplet& a, const Triplet& b) {
        return a.row != b.row ? a.row < b.row : a.col < b.col;
    });
    ptr_.assign(static_cast<std::size_t>(n) + 1, 0);
    entries_.reserve(entries.size());  // no doubling: a complete graph's weights are 10^8 entries
    const Triplet* prev = nullptr;
    for (const auto& t : entries) {
        if (prev && prev->row == t.row && prev->col == t.col) {
            entries_.back().weight += t.weight;  // repeated (row, col): sum
        } else {
            entries_.push_back({t.col, t.weight});
            ++ptr_[static_cast<std::size_t>(t.row) + 1];
        }
        prev = &t;
    }
    for (int i = 0; i < n; ++i) ptr_[i + 1] += ptr_[i];
}

std::span<const MixingMatrix::Entry> MixingMatrix::row(int i) const {
    return {entries_.data() + ptr_[i], entries_.data() + ptr_[i + 1]};
}

double MixingMatrix::at(int i, int j) const {
    auto r = row(i);
    auto it = std::lower_bound(r.begin(), r.end(), j,
                               [](const Entry& e, int col) { return e.col < col; });
    return (it != r.end() && it->col == j) ? it->weight : 0.0;
}

void MixingMatrix::apply(std::span<const double> x, std::span<double> y) const {
    for (int i = 0; i < n_; ++i) {
        double s = 0.0;
        for (const auto& e : row(i)) s += e.weight * x[static_cast<std::size_t>(e.col)];
        y[static_cast<std::size_t>(i)] = s;
    }
}

std::vector<double> MixingMatrix::row_sums() const {
    std::vector<double> s(static_cast<std::size_t>(n_), 0.0);
    for (int i = 0; i < n_; ++i)
        for (const auto& e : row(i)) s[static_cast<std::size_t>(i)] += e.weight;
    return s;
}

std::vector<double> MixingMatrix::column_sums() const {
    std::vector<double> s(static_cast<std::size_t>(n_), 0.0);
    for (const auto& e : entries_) s[static_cast<std::size_t>(e.col)] += e.weight;
    return s;
}

bool MixingMatrix::row_stochastic(double tol) const {
    auto s = row_sums();
    return nonnegative() &&
           std::all_of(s.begin(), s.end(), [tol](double v) { return std::abs(v - 1.0) <= tol; });
}

bool MixingMatrix::column_stochastic(double tol) const {
    auto s = column_sums();
    return nonnegative() &&
           std::all_of(s.begin(), s.end(), [tol](double v) { return std::abs(v - 1.0) <= tol; });
}

bool MixingMatrix::symmetric(double tol) const {
    for (int i = 0; i < n_; ++i)
        for (const auto& e : row(i))
            if (std::abs(e.weight - at(e.col, i)) > tol) return false;
    return true;
}

bool MixingMatrix::nonnegative() const {
    return std::all_of(entries_.begin(), entries_.end(),
                       [](const Entry& e) { return e.weight >= 0.0; });
}

std::vector<double> MixingMatrix::dense() const {
    std::vector<double> d(static_cast<std::size_t>(n_) * static_cast<std::size_t>(n_), 0.0);
    for (int i = 0; i < n_; ++i)
        for (const auto& e : row(i))
            d[static_cast<std::size_t>(i) * static_cast<std::size_t>(n_) +
              static_cast<std::size_t>(e.col)] = e.weight;
    return d;
}

MixingMatrix make_weights(const Digraph& g, WeightRule rule) {
    const int n = g.n();
    std::vector<Triplet> t;
    t.reserve(g.edges().size() + static_cast<std::size_t>(n));
    if ((rule == WeightRule::metropolis_hastings || rule == WeightRule::max_degree) &&
        !g.symmetric())
        throw TopologyError(fmt::format(
            "{} weights need an undirected graph (every edge with its reverse); use uniform or "
            "push_sum for a directed graph",
            to_string(rule)));
    switch (rule) {
        case WeightRule::uniform:
            for (int i = 0; i < n; ++i) {
                const double w = 1.0 / (g.in_degree(i) + 1);
                t.push_back({i, i, w});
                for (int j : g.in_neighbors(i)) t.push_back({i, j, w});
            }
            break;
        case WeightRule::metropolis_hastings:
            for (int i = 0; i < n; ++i) {
                double rest = 1.0;
                for (int j : g.in_neighbors(i)) {
                    const double w = 1.0 / (1 + std::max(g.in_degree(i), g.in_degree(j)));
                    t.push_back({i, j, w});
                    rest -= w;
                }
                t.push_back({i, i, rest});
            }
            break;
        case WeightRule::max_degree: {
            int dmax = 0;
            for (int i = 0; i < n; ++i) dmax = std::max(dmax, g.in_degree(i));
            const double w = 1.0 / (1 + dmax);
            for (int i = 0; i < n; ++i) {
                for (int j : g.in_neighbors(i)) t.push_back({i, j, w});
                t.push_back({i, i, 1.0 - g.in_degree(i) * w});
            }
            break;
        }
        case WeightRule::push_sum:
            for (int j = 0; j < n; ++j) {
                const double w = 1.0 / (g.out_degree(j) + 1);
                t.push_back({j, j, w});
                for (int i : g.out_neighbors(j)) t.push_back({i, j, w});
            }
            break;
        case WeightRule::explicit_weights:
            throw TopologyError("explicit weights come from the topology file, not from a rule");
    }
    return MixingMatrix(n, std::move(t));
}

void check_weights(const MixingMatrix& w, WeightKind kind, double tol) {
    for (int i = 0; i < w.n(); ++i)
        for (const auto& e : w.row(i))
            if (!(e.weight >= 0.0) || !std::isfinite(e.weight))
                throw TopologyError(fmt::format("weight W[{}][{}] = {} must be finite and >= 0", i,
                                                e.col, e.weight));
    const bool rows = kind == WeightKind::averaging;
    auto sums = rows ? w.row_sums() : w.column_sums();
    for (std::size_t i = 0; i < sums.size(); ++i)
        if (std::abs(sums[i] - 1.0) > tol)
            throw TopologyError(fmt::format(
                "{} {} of W sums to {:.12g}, not 1 ({} weights need {} sums of 1 within {:g})",
                rows ? "row" : "column", i, sums[i], to_string(kind), rows ? "row" : "column",
                tol));
}

}  // namespace gossamer::topology
