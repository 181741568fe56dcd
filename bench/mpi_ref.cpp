#include "mpi_ref.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "perftest.hpp"

namespace gossamer::bench {

std::string mpi_command(const std::string& mpirun, const std::string& program, int n, bool ring,
                        const std::vector<std::size_t>& sizes, int iterations, int warmup) {
    return fmt::format(
        "{} --allow-run-as-root --oversubscribe -np {}{} {} --sizes {} --iters {} --warmup {}",
        mpirun, n,
        ring ? " --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 4" : "",
        program, fmt::join(sizes, ","), iterations, warmup);
}

MpiRun run_mpi_allreduce(const std::string& mpirun, const std::string& program, int n, bool ring,
                         const std::vector<std::size_t>& sizes, int iterations, int warmup,
                         std::chrono::seconds timeout) {
    MpiRun r;
    const auto cmd = fmt::format("timeout {} {}", timeout.count(),
                                 mpi_command(mpirun, program, n, ring, sizes, iterations, warmup));
    const auto [status, text] = run_command(cmd);
    // The program prints one JSON line; mpirun may add its own chatter around it.
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (line.empty() || line[0] != '{') continue;
        try {
            const auto j = nlohmann::json::parse(line);
            for (const auto& row : j.at("rows")) r.times.push_back(row.at("times"));
        } catch (const std::exception& e) {
            r.error = fmt::format("{}: unreadable output ({})", program, e.what());
            return r;
        }
    }
    if (status != 0 || r.times.size() != sizes.size()) {
        r.times.clear();
        r.error = fmt::format("mpirun -np {}{} failed (status {}): {}", n, ring ? " (ring)" : "",
                              status, last_line(text));
        return r;
    }
    r.ok = true;
    return r;
}

}  // namespace gossamer::bench
