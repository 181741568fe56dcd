#pragma once
/// Dense spectral tools for mixing matrices (LAPACK through OpenBLAS). Matrices are row-major
/// n x n vectors of doubles.

#include <complex>
#include <cstdint>
#include <vector>

#include "gossamer/topology/schedule.hpp"

namespace gossamer::topology {

/// All eigenvalues of a; symmetric matrices (within 1e-12) take the faster symmetric solver.
/// Throws TopologyError if LAPACK does not converge.
std::vector<std::complex<double>> eigenvalues(std::vector<double> a, int n);

/// Second-largest eigenvalue modulus (0 for n = 1). For a stochastic matrix the largest is 1,
/// so SLEM < 1 exactly when repeated mixing converges to consensus.
double slem(const std::vector<double>& a, int n);

/// Dense product W(first + count - 1) ... W(first + 1) W(first) (the map of `count` rounds).
std::vector<double> round_product(const Schedule& s, std::int64_t first, std::int64_t count);

}  // namespace gossamer::topology
