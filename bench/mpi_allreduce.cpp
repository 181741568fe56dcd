// The reference of `gossamer bench allreduce`: MPI_Allreduce (fp32, sum) timed the way the
// bench times ours: warm-up operations, then per operation a barrier, the time to the result on
// every rank, and the slowest rank's time; every result is checked. Rank 0 prints one JSON line:
//   {"procs": N, "rows": [{"bytes": B, "times": [seconds, ...]}, ...]}
// Usage: mpirun -np N gossamer_mpi_allreduce --sizes BYTES[,BYTES...] --iters I --warmup W
//
// With --step-ms MS[,MS...] it emulates data-parallel training instead (scripts/lab/mpi_ring.sh):
// one size, and per iteration rank r sleeps MS[r] (the last entry for ranks past the list: its
// padded step) and then all-reduces, with no barrier between iterations, as a training loop
// does; after W untimed iterations it times I of them on every rank and prints
//   {"procs": N, "mode": "train", "bytes": B, "iters": I, "seconds": S, "per_iteration": S/I}
// with S the slowest rank's time. The last result is checked.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

int usage(const char* why) {
    std::fprintf(stderr,
                 "gossamer_mpi_allreduce: %s; usage: --sizes BYTES[,BYTES...] --iters I "
                 "--warmup W [--step-ms MS[,MS...]]\n",
                 why);
    return 2;
}

// Rank r's input: (r + 1) + (i mod 1024), as in bench/allreduce_rank.cpp: the sums are exact.
float input(int rank, std::size_t i) {
    return static_cast<float>(rank + 1) + static_cast<float>(i % 1024);
}

// Checks recv, the sum of every rank's input(); aborts the job on a wrong value.
void check(const std::vector<float>& recv, int rank, int n) {
    const std::size_t sum0 = static_cast<std::size_t>(n) * (n + 1) / 2;
    for (std::size_t i = 0; i < recv.size(); ++i) {
        const auto want = static_cast<float>(sum0 + n * (i % 1024));
        if (recv[i] != want) {
            std::fprintf(stderr, "rank %d: MPI_Allreduce gave %g at %zu, expected %g\n", rank,
                         static_cast<double>(recv[i]), i, static_cast<double>(want));
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
}

// --step-ms: a training loop's iterations (see the header).
int train(std::size_t bytes, const std::vector<double>& step_ms, int iters, int warmup) {
    int rank = 0, n = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    const std::size_t floats = bytes / sizeof(float);
    std::vector<float> send(floats), recv(floats);
    for (std::size_t i = 0; i < floats; ++i) send[i] = input(rank, i);
    const double pad = step_ms[std::min(static_cast<std::size_t>(rank), step_ms.size() - 1)];
    const auto iteration = [&] {
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(pad));
        MPI_Allreduce(send.data(), recv.data(), static_cast<int>(floats), MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
    };
    for (int it = 0; it < warmup; ++it) iteration();
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    for (int it = 0; it < iters; ++it) iteration();
    const double mine = MPI_Wtime() - t0;
    check(recv, rank, n);
    double slowest = 0;
    MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0)
        std::printf(
            "{\"procs\": %d, \"mode\": \"train\", \"bytes\": %zu, \"iters\": %d, "
            "\"seconds\": %.6f, \"per_iteration\": %.6f}\n",
            n, bytes, iters, slowest, slowest / iters);
    MPI_Finalize();
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, n = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    std::vector<std::size_t> sizes;
    std::vector<double> step_ms;
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
        } else if (key == "--step-ms") {
            std::stringstream ss(value);
            for (std::string item; std::getline(ss, item, ',');) {
                step_ms.push_back(std::strtod(item.c_str(), nullptr));
                if (!(step_ms.back() >= 0)) {
                    MPI_Finalize();
                    return usage(("--step-ms: '" + item + "' is not a number of ms >= 0").c_str());
                }
            }
        } else {
            MPI_Finalize();
            return usage(("unknown option " + key).c_str());
        }
    }
    if (sizes.empty() || iters < 1 || warmup < 0) {
        MPI_Finalize();
        return usage("need --sizes and --iters >= 1");
    }
    if (!step_ms.empty()) {
        if (sizes.size() != 1) {
            MPI_Finalize();
            return usage("--step-ms takes one size");
        }
        return train(sizes[0], step_ms, iters, warmup);
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
            check(recv, rank, n);
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
