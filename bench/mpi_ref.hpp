#pragma once
/// Runs bench/mpi_allreduce.cpp (MPI_Allreduce of fp32, sum) under mpirun and reads its JSON.

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace gossamer::bench {

struct MpiRun {
    bool ok = false;
    /// Per size (in the order asked): the timed iterations' seconds, each the slowest rank's.
    std::vector<std::vector<double>> times;
    std::string error;  ///< why not ok: one line
};

/// `mpirun --allow-run-as-root --oversubscribe -np N [ring MCA options] PROGRAM ...`, bounded by
/// `timeout` (coreutils timeout). ring: forces OpenMPI's ring algorithm
/// (coll_tuned_use_dynamic_rules 1, coll_tuned_allreduce_algorithm 4).
MpiRun run_mpi_allreduce(const std::string& mpirun, const std::string& program, int n, bool ring,
                         const std::vector<std::size_t>& sizes, int iterations, int warmup,
                         std::chrono::seconds timeout);

/// The shell command run_mpi_allreduce runs (for reports and docs).
std::string mpi_command(const std::string& mpirun, const std::string& program, int n, bool ring,
                        const std::vector<std::size_t>& sizes, int iterations, int warmup);

}  // namespace gossamer::bench
