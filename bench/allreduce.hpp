#pragma once
/// `gossamer bench allreduce`: our ring all-reduce (proto::AllreduceProtocol, the code training
/// runs) between real processes over UCX, beside OpenMPI's MPI_Allreduce run by mpirun with its
/// default algorithm choice and with its ring forced; and the one-peer-exponential neighbour
/// exchange of the same sizes. docs/results/benchmarks.md says exactly what is timed.

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "gossamer/core/json.hpp"

namespace gossamer::bench {

struct AllreduceBenchOptions {
    std::vector<int> procs = {2, 4, 8};
    std::vector<std::size_t> sizes = {1u << 20, 4u << 20, 16u << 20, 64u << 20};  ///< bytes
    int iterations = 20;  ///< timed operations per size
    int warmup = 5;       ///< untimed operations before them
    /// AllreduceOptions::chunks (pipelining along the ring); 0: per size, messages of about
    /// 1 MiB (chunks_for())
    int chunks = 0;
    int repeats = 3;           ///< runs of each side, alternated; the lowest median counts
    bool peer_errors = false;  ///< UCX error handling (TCP on one host) instead of shared memory
    bool reference = true;     ///< run the MPI reference program
    std::string mpirun = "mpirun";
    std::string mpi_program;  ///< default: the one built beside (empty when MPI was not found)
    std::chrono::milliseconds timeout{120'000};  ///< per wait (one operation, one barrier)
    std::function<void(std::string_view)> progress;
};

/// Seconds per operation (the slowest rank's, per iteration) over the timed iterations.
struct OpStats {
    double median = 0, mean = 0, min = 0;  ///< 0: not measured
    bool measured() const noexcept { return median > 0; }
};

struct AllreduceRow {
    int procs = 0;
    std::size_t bytes = 0;
    int chunks = 1;  ///< chunks per ring segment ours ran with
    OpStats ours, mpi_default, mpi_ring;
    OpStats exchange;   ///< one-peer-exponential round; unmeasured when procs is no power of 2
    double target = 0;  ///< maximum ratio ours / faster MPI (1.1 at 2 processes; 0: none)
    double best_mpi() const;  ///< the faster MPI median (0 when none ran)
};

struct AllreduceReport {
    std::vector<AllreduceRow> rows;
    int iterations = 0, warmup = 0, chunks = 1, repeats = 1;
    bool peer_errors = false;
    unsigned cores = 0;
    std::string reference_error;  ///< why MPI did not run ("" when it did)
    json::Json to_json() const;
    std::string to_text() const;
};

/// The MPI reference program built with this binary, or "" when CMake found no MPI.
std::string default_mpi_program();

/// Chunks per ring segment that make messages of about 1 MiB (1 .. 64): the bench's default.
int chunks_for(std::size_t bytes, int n);

/// Runs every (procs, size). Throws gossamer::Error naming the rank when a rank fails, dies,
/// times out or computes a wrong sum.
AllreduceReport run_allreduce_bench(const AllreduceBenchOptions& options);

/// Seconds per op from per-rank, per-iteration times (warm-up already dropped): the slowest
/// rank of each iteration, then median, mean and min over iterations.
OpStats op_stats(const std::vector<std::vector<double>>& per_rank);

}  // namespace gossamer::bench
