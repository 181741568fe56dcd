// scripts/lab/mpi_ring.sh: OpenMPI's MPI_Allreduce between the lab's namespaces, over the veths
// the kernel shapes (the like-for-like reference of the lab's allreduce,
// docs/results/benchmarks.md).
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "lab_support.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

using namespace gossamer::test;

namespace {

const std::string kScript = std::string(GOSSAMER_SOURCE_DIR) + "/scripts/lab/mpi_ring.sh";

int lines(const std::string& s) {
    int n = 0;
    for (char c : s) n += c == '\n';
    return n;
}

std::string mpi_missing() {
#ifndef GOSSAMER_MPI_REF_BINARY
    return "the MPI reference program is not built (no MPI found at configure time, or "
           "GOSSAMER_BUILD_MPI_REF=OFF; scripts/deps.sh --bench installs OpenMPI)";
#else
    return missing_program("mpirun", "scripts/deps.sh --bench installs openmpi-bin");
#endif
}

}  // namespace

TEST_SUITE("lab") {
    TEST_CASE("lab: scripts/lab/mpi_ring.sh refuses bad flags in one line, exit 2") {
        for (const auto& [args, part] : std::initializer_list<std::pair<std::string, std::string>>{
                 {"--bytes 12x", "--bytes '12x'"},
                 {"--iters 0", "--iters '0'"},
                 {"--variants ring,tree", "'tree' is not default or ring"},
                 {"--cluster /nonexistent.json", "--cluster /nonexistent.json: no such file"},
                 {"--fast", "unknown option '--fast'"}}) {
            const auto r = run(kScript + " " + args);
            INFO(args << " -> " << r.status << ": " << r.err);
            CHECK(r.status == 2);
            CHECK(lines(r.err) == 1);
            CHECK(r.err.find(part) != std::string::npos);
            CHECK(r.out.empty());
        }
    }

    TEST_CASE("lab: MPI_Allreduce runs between the lab's namespaces, through the shaped veths") {
        if (!have_netns() || !have_component("mpi", mpi_missing())) return;
#ifdef GOSSAMER_MPI_REF_BINARY
        // 3 ranks at 200 Mbit/s, steps of 10 ms (30 ms on rank 2); 1 MiB, 2 timed iterations
        // after 1 warm-up.
        TempDir dir;
        const auto cluster = dir.write("three.json", R"({"n": 3,
            "defaults": {"base_time": 0.01, "uplink": 2.5e7, "downlink": 2.5e7},
            "peers": [{"rank": 2, "factor": 3}], "network": {"latency": 1e-4, "bandwidth": 1e9}})");
        const auto r =
            run(fmt::format("GOSSAMER={} GOSSAMER_MPI_ALLREDUCE={} timeout -k 5 150 {} --cluster "
                            "{} --bytes 1048576 "
                            "--iters 2 --variants default,ring",
                            GOSSAMER_BINARY, GOSSAMER_MPI_REF_BINARY, kScript, cluster));
        INFO(r.out << r.err);
        REQUIRE(r.status == 0);
        std::istringstream out(r.out);
        int variants = 0;
        for (std::string line; std::getline(out, line);) {
            const auto j = nlohmann::json::parse(line);
            const auto& res = j.at("result");
            CHECK(res.at("mode") == "train");
            CHECK(res.at("bytes") == 1048576);
            CHECK(res.at("iters") == 2);
            const int n = res.at("procs");
            CHECK(n >= 2);
            CHECK(res.at("per_iteration").get<double>() > 0);
            // The bytes crossed the qdiscs: under the ring every rank's uplink carried its share
            // of the 3 all-reduces, 2 (n - 1) / n of the vector each; OpenMPI's own choice may
            // load the ranks unevenly, but moves at least that much in all.
            REQUIRE(j.at("uplink_bytes").size() == static_cast<std::size_t>(n));
            const double share = 3 * 2.0 * (n - 1) / n * 1048576;
            double total = 0;
            for (const auto& b : j.at("uplink_bytes")) {
                total += b.get<double>();
                if (j.at("variant") == "ring") CHECK(b.get<double>() >= share);
            }
            CHECK(total >= n * share);
            ++variants;
        }
        CHECK(variants == 2);
#endif
    }
}
