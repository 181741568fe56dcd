// srun and mpirun start a job of gossamer peer processes from a topology file that gives only a
// count: the ranks, the job's size and rank 0's host come from the launcher (docs/
// cluster-launchers.md). Both run in the root network namespace of this one host. The result
// must be the job a list of host:port entries runs: the same model.bin, byte for byte.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <unistd.h>

// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// (keep the line above first)
#include <chrono>
#include <filesystem>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "processes.hpp"
#include "support/optional.hpp"
#include "support/ports.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

using namespace gossamer::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

const std::string kBin = GOSSAMER_BINARY;
const std::string kSource = GOSSAMER_SOURCE_DIR;
const std::string kConfig = kSource + "/examples/train/logreg_synthetic.json";
const std::string kCount4 = kSource + "/examples/topologies/count4.json";

std::string slurm_missing() {
    for (const char* p : {"srun", "sinfo", "slurmctld", "slurmd"})
        if (auto m = missing_program(p, "scripts/deps.sh --lab installs slurm-wlm"); !m.empty())
            return m;
    if (geteuid() != 0) return "not root (scripts/lab/slurm.sh runs slurmd as root)";
    return {};
}

std::string mpi_missing() {
    return missing_program("mpirun", "scripts/deps.sh --bench installs openmpi-bin");
}

/// A single-node Slurm cluster of its own (own folder, own ports) for one test; stopped when
/// the test ends, also on failure, and by slurm.sh's watcher if this process is killed.
class SlurmCluster {
  public:
    explicit SlurmCluster(const fs::path& dir) : dir_(dir / "slurm") {
        // --owner: the daemons go with this process even when ctest kills it at its timeout.
        auto r = run(fmt::format("timeout -k 5 60 '{}/scripts/lab/slurm.sh' start '{}' --owner {}",
                                 kSource, dir_.string(), getpid()));
        started_ = r.status == 0;
        why_ = r.out + r.err;
    }
    ~SlurmCluster() {
        run(fmt::format("timeout -k 5 30 '{}/scripts/lab/slurm.sh' stop '{}'", kSource,
                        dir_.string()));
    }
    bool started() const { return started_; }
    const std::string& why() const { return why_; }
    std::string env() const { return "SLURM_CONF='" + (dir_ / "slurm.conf").string() + "'"; }

  private:
    fs::path dir_;
    bool started_ = false;
    std::string why_;
};

/// The gossamer peer arguments every run of the job shares (the launcher prepends itself).
std::string peer_args(const std::string& topology, const std::string& out) {
    return fmt::format(
        "'{}' peer --topology '{}' --config '{}' --epochs 2 --algorithm dpsgd "
        "--job-id 18 --out '{}'",
        kBin, topology, kConfig, out);
}

/// The same job from a list of host:port entries, each rank started with --rank: the result
/// every launcher must reproduce.
std::string reference_model(const TempDir& dir) {
    std::string list;
    for (int port : free_ports(4))
        list += fmt::format("{}{{\"host\": \"127.0.0.1\", \"port\": {}}}", list.empty() ? "" : ",",
                            port);
    const auto topology =
        dir.write("list4.json", "{\"version\": 1, \"peers\": [" + list +
                                    "], \"graph\": {\"family\": \"ring\"}, \"weights\": "
                                    "\"metropolis_hastings\"}");
    const auto out = (dir.path() / "reference").string();
    std::vector<std::unique_ptr<Process>> peers;
    for (int r = 0; r < 4; ++r)
        peers.push_back(std::make_unique<Process>(
            std::vector<std::string>{kBin, "peer", "--topology", topology, "--config", kConfig,
                                     "--epochs", "2", "--algorithm", "dpsgd", "--job-id", "18",
                                     "--rank", std::to_string(r), "--out", out},
            (dir.path() / fmt::format("reference{}.log", r)).string(),
            std::vector<std::pair<std::string, std::string>>{{"GOSSAMER_JOB_TOKEN", "t"}}));
    for (int r = 0; r < 4; ++r) {
        CAPTURE(r);
        const int status = peers[static_cast<std::size_t>(r)]->wait(60s);
        INFO(peers[static_cast<std::size_t>(r)]->log());
        REQUIRE(status == 0);
    }
    return read_file(out + "/model.bin");
}

/// The job the launcher ran: every rank's metrics, the average of all four, the same model as
/// the reference job.
void check_job(const RunResult& r, const TempDir& dir, const std::string& out) {
    INFO("stderr:\n" << r.err);
    REQUIRE(r.status == 0);
    for (int rank = 0; rank < 4; ++rank) {
        CAPTURE(rank);
        CHECK(fs::exists(out + fmt::format("/peer{}.jsonl", rank)));
        CHECK(r.err.find(fmt::format("[rank {}] rendezvous at ", rank)) != std::string::npos);
    }
    const std::string average = read_file(out + "/average.json");
    CHECK_MESSAGE(
        average.find("\"survivors\": [\n    0,\n    1,\n    2,\n    3\n  ]") != std::string::npos,
        average);
    const std::string model = read_file(out + "/model.bin");
    REQUIRE(!model.empty());
    CHECK_MESSAGE(model == reference_model(dir),
                  "the launcher's job differs from the same job started from a host:port list");
}

/// A launcher that started 3 ranks for a topology of 4: every rank says the same one line and
/// exits 2, before writing anything (mpirun may stop the others once the first has exited).
void check_size_mismatch(const RunResult& r, const std::string& out, const std::string& var) {
    INFO("stderr:\n" << r.err);
    CHECK(r.status == 2);
    std::set<std::string> lines;
    int count = 0;
    std::istringstream in(r.err);
    for (std::string line; std::getline(in, line);)
        if (line.rfind("error: ", 0) == 0) lines.insert(line), ++count;
    CHECK(count >= 1);
    CHECK(count <= 3);
    REQUIRE(lines.size() == 1);
    CHECK(*lines.begin() ==
          fmt::format("error: {}: {} started 3 peers but the topology file has 4; start 4 peers "
                      "(srun -n 4, mpirun -np 4) or use a topology file for 3",
                      var, var == "SLURM_STEP_NUM_TASKS" ? "srun" : "mpirun"));
    CHECK_FALSE(fs::exists(out));
}

std::string mpirun() {
    return geteuid() == 0 ? "mpirun --allow-run-as-root --oversubscribe" : "mpirun --oversubscribe";
}

}  // namespace

TEST_SUITE("lab") {
    TEST_CASE("srun starts a 4-peer job from a count-only topology and writes the exact average") {
        if (!have_component("slurm", slurm_missing())) return;
        TempDir dir;
        SlurmCluster slurm(dir.path());
        REQUIRE_MESSAGE(slurm.started(), slurm.why());
        const auto out = (dir.path() / "srun").string();
        const auto r = run(fmt::format(
            "{} GOSSAMER_RENDEZVOUS_PORT={} GOSSAMER_JOB_TOKEN=t timeout -k 5 90 srun -n 4 "
            "--overcommit {}",
            slurm.env(), free_ports(1)[0], peer_args(kCount4, out)));
        check_job(r, dir, out);
        CHECK(r.err.find("(the first host of SLURM_STEP_NODELIST)") != std::string::npos);
    }

    TEST_CASE("srun with a world size that disagrees with the topology gives one line and exit 2") {
        if (!have_component("slurm", slurm_missing())) return;
        TempDir dir;
        SlurmCluster slurm(dir.path());
        REQUIRE_MESSAGE(slurm.started(), slurm.why());
        const auto out = (dir.path() / "srun").string();
        const auto r = run(fmt::format(
            "{} GOSSAMER_RENDEZVOUS_PORT={} GOSSAMER_JOB_TOKEN=t timeout -k 5 60 srun -n 3 "
            "--overcommit {}",
            slurm.env(), free_ports(1)[0], peer_args(kCount4, out)));
        check_size_mismatch(r, out, "SLURM_STEP_NUM_TASKS");
    }

    TEST_CASE(
        "mpirun starts a 4-peer job from a count-only topology and writes the exact average") {
        if (!have_component("mpi", mpi_missing())) return;
        TempDir dir;
        const auto out = (dir.path() / "mpirun").string();
        const auto r = run(
            fmt::format("GOSSAMER_JOB_TOKEN=t timeout -k 5 90 {} -np 4 -x GOSSAMER_JOB_TOKEN -x "
                        "GOSSAMER_RENDEZVOUS_PORT={} {}",
                        mpirun(), free_ports(1)[0], peer_args(kCount4, out)));
        check_job(r, dir, out);
        CHECK(r.err.find("rendezvous at 127.0.0.1:") != std::string::npos);
    }

    TEST_CASE(
        "mpirun with a world size that disagrees with the topology gives one line and exit 2") {
        if (!have_component("mpi", mpi_missing())) return;
        TempDir dir;
        const auto out = (dir.path() / "mpirun").string();
        const auto r = run(fmt::format(
            "GOSSAMER_JOB_TOKEN=t timeout -k 5 60 {} -np 3 -x GOSSAMER_RENDEZVOUS_PORT={} {}",
            mpirun(), free_ports(1)[0], peer_args(kCount4, out)));
        check_size_mismatch(r, out, "OMPI_COMM_WORLD_SIZE");
    }
}
