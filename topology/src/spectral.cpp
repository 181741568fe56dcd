#include "gossamer/topology/spectral.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "gossamer/core/error.hpp"

// LAPACK's Fortran interface (gfortran ABI: character lengths are hidden trailing arguments).
extern "C" {
void dgeev_(const char* jobvl, const char* jobvr, const int* n, double* a, const int* lda,
            double* wr, double* wi, double* vl, const int* ldvl, double* vr, const int* ldvr,
            double* work, const int* lwork, int* info, std::size_t, std::size_t);
void dsyev_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w,
            double* work, const int* lwork, int* info, std::size_t, std::size_t);
}

namespace gossamer::topology {
namespace {

bool dense_symmetric(const std::vector<double>& a, int n) {
    const auto N = static_cast<std::size_t>(n);
    for (std::size_t i = 0; i < N; ++i)
        for (std::size_t j = i + 1; j < N; ++j)
            if (std::abs(a[i * N + j] - a[j * N + i]) > 1e-12) return false;
    return true;
}

std::vector<std::complex<double>> symmetric_eigenvalues(std::vector<double>& a, int n) {
    std::vector<double> w(static_cast<std::size_t>(n));
    int info = 0, lwork = -1;
    double query = 0;
    dsyev_("N", "U", &n, a.data(), &n, w.data(), &query, &lwork, &info, 1, 1);
    lwork = std::max(1, static_cast<int>(query));
    std::vector<double> work(static_cast<std::size_t>(lwork));
    dsyev_("N", "U", &n, a.data(), &n, w.data(), work.data(), &lwork, &info, 1, 1);
    if (info != 0) throw TopologyError(fmt::format("LAPACK dsyev failed (info = {})", info));
    return {w.begin(), w.end()};
}

std::vector<std::complex<double>> general_eigenvalues(std::vector<double>& a, int n) {
    // Row-major a is the column-major transpose; both have the same eigenvalues.
    std::vector<double> wr(static_cast<std::size_t>(n)), wi(static_cast<std::size_t>(n));
    int info = 0, lwork = -1, one = 1;
    double query = 0, dummy = 0;
    dgeev_("N", "N", &n, a.data(), &n, wr.data(), wi.data(), &dummy, &one, &dummy, &one, &query,
           &lwork, &info, 1, 1);
    lwork = std::max(1, static_cast<int>(query));
    std::vector<double> work(static_cast<std::size_t>(lwork));
    dgeev_("N", "N", &n, a.data(), &n, wr.data(), wi.data(), &dummy, &one, &dummy, &one,
           work.data(), &lwork, &info, 1, 1);
    if (info != 0) throw TopologyError(fmt::format("LAPACK dgeev failed (info = {})", info));
    std::vector<std::complex<double>> out;
    for (std::size_t i = 0; i < wr.size(); ++i) out.emplace_back(wr[i], wi[i]);
    return out;
}

}  // namespace

std::vector<std::complex<double>> eigenvalues(std::vector<double> a, int n) {
    if (n < 1 || a.size() != static_cast<std::size_t>(n) * static_cast<std::size_t>(n))
        throw TopologyError("eigenvalues: matrix size does not match n");
    return dense_symmetric(a, n) ? symmetric_eigenvalues(a, n) : general_eigenvalues(a, n);
}

double slem(const std::vector<double>& a, int n) {
    if (n == 1) return 0.0;
    auto ev = eigenvalues(a, n);
    std::vector<double> mod;
    mod.reserve(ev.size());
    for (auto z : ev) mod.push_back(std::abs(z));
    std::partial_sort(mod.begin(), mod.begin() + 2, mod.end(), std::greater<>());
    return mod[1];
}

std::vector<double> round_product(const Schedule& s, std::int64_t first, std::int64_t count) {
    const auto N = static_cast<std::size_t>(s.n());
    std::vector<double> m(N * N, 0.0), next(N * N);
    for (std::size_t i = 0; i < N; ++i) m[i * N + i] = 1.0;
    for (std::int64_t t = first; t < first + count; ++t) {
        auto round = s.at(t);
        // next = W(t) * m, row by row: row i of next = sum_j W_ij * row j of m.
        std::fill(next.begin(), next.end(), 0.0);
        for (std::size_t i = 0; i < N; ++i) {
            double* out = next.data() + i * N;
            for (const auto& e : round->weights.row(static_cast<int>(i))) {
                const double* in = m.data() + static_cast<std::size_t>(e.col) * N;
                for (std::size_t k = 0; k < N; ++k) out[k] += e.weight * in[k];
            }
        }
        m.swap(next);
    }
    return m;
}

}  // namespace gossamer::topology
