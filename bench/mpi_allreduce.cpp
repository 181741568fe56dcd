// The reference of `gossamer bench allreduce`: MPI_Allreduce (fp32, sum) timed the way the
// bench times ours: warm-up operations, then per operation a barrier, the time to the result on
// every rank, and the slowest rank's time; every result is checked. Rank 0 prints one JSON line:
//   {"procs": N, "rows": [{"bytes": B, "times": [seconds, ...]}, ...]}
// Usage: mpirun -np N gossamer_mpi_allreduce --sizes BYTES[,BYTES...] --iters I --warmup W
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace {

int usage(const char* why) {
    std::fprintf(stderr,
                 "gossamer_mpi_allreduce: %s; usage: --sizes BYTES[,BYTES...] --iters I "
                 "--warmup W\n",
                 why);
    return 2;
}

// Rank r's input: (r + 1) + (i mod 1024), as in bench/allreduce_rank.cpp: the sums are exact.
float input(int rank, std::size_t i) {
    return static_cast<float>(rank + 1) + static_cast<float>(i % 1024);
}

}  // namespace

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, n = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    std::vector<std::size_t> sizes;
    int iters = 20, warmup = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string key = argv[i], value = argv[i + 1];
        if (key == "--sizes") {
            std::stringstream ss(value);
            for (std::string item; std::getline(ss, item, ',');)
                sizes.push_back(std::strtoull(item.c_str(), nullptr, 10));
        } else if (key == "--iters") {
            iters = std::atoi(value.c_str());
        } else if (key == "--warmup") {
            warmup = std::atoi(value.c_str());
        } else {
            MPI_Finalize();
            return usage(("unknown option " + key).c_str());
        }
    }
    if (sizes.empty() || iters < 1 || warmup < 0) {
        MPI_Finalize();
        return usage("need --sizes and --iters >= 1");
    }
    std::string out = "{\"procs\": " + std::to_string(n) + ", \"rows\": [";
    for (std::size_t s = 0; s < sizes.size(); ++s) {
        const std::size_t floats = sizes[s] / sizeof(float);
        std::vector<float> send(floats), recv(floats);
        for (std::size_t i = 0; i < floats; ++i) send[i] = input(rank, i);
        std::vector<double> times, slowest(static_cast<std::size_t>(iters));
        for (int it = 0; it < warmup + iters; ++it) {
            MPI_Barrier(MPI_COMM_WORLD);
            const double t0 = MPI_Wtime();
            MPI_Allreduce(send.data(), recv.data(), static_cast<int>(floats), MPI_FLOAT, MPI_SUM,
                          MPI_COMM_WORLD);
            const double t = MPI_Wtime() - t0;
            if (it >= warmup) times.push_back(t);
            const std::size_t sum0 = static_cast<std::size_t>(n) * (n + 1) / 2;
            for (std::size_t i = 0; i < floats; ++i) {
                const auto want = static_cast<float>(sum0 + n * (i % 1024));
                if (recv[i] != want) {
                    std::fprintf(stderr, "rank %d: MPI_Allreduce gave %g at %zu, expected %g\n",
                                 rank, static_cast<double>(recv[i]), i, static_cast<double>(want));
                    MPI_Abort(MPI_COMM_WORLD, 1);
                }
            }
        }
        MPI_Reduce(times.data(), slowest.data(), iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        out += std::string(s ? ", " : "") + "{\"bytes\": " + std::to_string(sizes[s]) +
               ", \"times\": [";
        for (int it = 0; it < iters; ++it) {
            char num[64];
            std::snprintf(num, sizeof(num), "%s%.9g", it ? ", " : "", slowest[std::size_t(it)]);
            out += num;
        }
        out += "]}";
    }
    out += "]}";
    if (rank == 0) std::printf("%s\n", out.c_str());
    MPI_Finalize();
    return 0;
}
