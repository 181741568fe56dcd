#pragma once
/// Mixing matrices and the rules that make them from a graph.
///
/// Convention (DESIGN.md): W_ij is the weight receiver i gives sender j, x_i <- sum_j W_ij x_j.
/// Averaging weights (D-PSGD) have rows summing to 1; push-sum weights have columns summing to 1
/// (each sender splits its whole mass among itself and its out-neighbours).

#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "gossamer/topology/graph.hpp"

namespace gossamer::topology {

/// Which sums must be 1: rows (averaging) or columns (push-sum).
enum class WeightKind { averaging, push_sum };

/// How weights are made from a graph.
enum class WeightRule {
    uniform,              ///< W_ij = 1/(in_degree(i)+1) for j in N_in(i) and j = i
    metropolis_hastings,  ///< W_ij = 1/(1+max(d_i,d_j)); W_ii = 1 - sum; undirected graphs
    max_degree,           ///< W_ij = 1/(1+d_max);        W_ii = 1 - d_i/(1+d_max); undirected
    push_sum,             ///< W_ij = 1/(out_degree(j)+1): column-stochastic, any graph
    explicit_weights,     ///< given per edge (and per self-loop) in the topology file
};

std::string_view to_string(WeightKind kind) noexcept;
std::string_view to_string(WeightRule rule) noexcept;
std::optional<WeightRule> parse_weight_rule(std::string_view name) noexcept;
/// The kind a generated rule produces (explicit weights declare theirs).
WeightKind kind_of(WeightRule rule) noexcept;

/// One nonzero entry of a mixing matrix: W(row, col) = weight.
struct Triplet {
    int row;
    int col;
    double weight;
};

/// A sparse n x n mixing matrix stored by rows (receivers); the diagonal is stored explicitly.
class MixingMatrix {
  public:
    struct Entry {
        int col;
        double weight;
    };

    MixingMatrix() = default;
    /// Builds from entries; repeated (row, col) pairs are summed. Throws TopologyError on a rank
    /// out of range.
    MixingMatrix(int n, std::vector<Triplet> entries);

    int n() const noexcept { return n_; }
    std::span<const Entry> row(int i) const;  ///< sorted by column
    double at(int i, int j) const;            ///< 0 when absent
    std::size_t nonzeros() const noexcept { return entries_.size(); }

    /// y = W x (sizes n). Used by analysis and, later, by the reference mixing of tests.
    void apply(std::span<const double> x, std::span<double> y) const;
    std::vector<double> row_sums() const;
    std::vector<double> column_sums() const;
    bool row_stochastic(double tol = 1e-9) const;
    bool column_stochastic(double tol = 1e-9) const;
    bool symmetric(double tol = 1e-12) const;
    bool nonnegative() const;
    /// Row-major dense copy (n*n doubles).
    std::vector<double> dense() const;

  private:
    int n_ = 0;
    std::vector<std::size_t> ptr_;
    std::vector<Entry> entries_;
};

/// Makes the weights of `rule` for graph g. metropolis_hastings and max_degree need an undirected
/// graph and throw TopologyError otherwise; explicit_weights cannot be generated and throws.
MixingMatrix make_weights(const Digraph& g, WeightRule rule);

/// Checks that W has the sums its kind requires (tolerance 1e-9) and no negative entries;
/// throws TopologyError naming the first row or column that fails.
void check_weights(const MixingMatrix& w, WeightKind kind, double tol = 1e-9);

}  // namespace gossamer::topology
