// gossamer peer with a count-only topology and no launcher: --rendezvous and --address, a taken
// rendezvous port, and every bad flag or variable as one line and exit status 2.
#include <doctest/doctest.h>
#include <fmt/format.h>

// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// (keep the line above first)
#include <boost/asio.hpp>
#include <chrono>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "processes.hpp"
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
// No launcher's variables leak in from the environment the tests run in.
const std::string kClean =
    "env -u OMPI_COMM_WORLD_RANK -u PMI_RANK -u SLURM_PROCID -u RANK -u MASTER_ADDR "
    "-u GOSSAMER_RENDEZVOUS -u GOSSAMER_RENDEZVOUS_PORT GOSSAMER_JOB_TOKEN=t ";

int free_port() {
    return free_ports(1)[0];
}

std::vector<std::string> nonempty_lines(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) out.push_back(line);
    return out;
}

}  // namespace

TEST_SUITE("lab") {
    TEST_CASE("peers given --rendezvous and --address run a count-only job without a launcher") {
        TempDir dir;
        const auto out = (dir.path() / "out").string();
        const int port = free_port();
        // Written once, before any peer starts: a rewrite while a started peer reads it could
        // give that peer an empty file.
        const std::string topology = dir.write("count3.json", R"({"version": 1,
                        "peers": {"count": 3}, "graph": {"family": "ring"}})");
        std::vector<std::unique_ptr<Process>> peers;
        for (int r = 0; r < 3; ++r)
            peers.push_back(std::make_unique<Process>(
                std::vector<std::string>{
                    kBin, "peer", "--topology", topology, "--config", kConfig, "--epochs", "1",
                    "--rank", std::to_string(r), "--rendezvous", fmt::format("127.0.0.1:{}", port),
                    "--address", "127.0.0.1", "--out", out, "--join-timeout", "20"},
                (dir.path() / fmt::format("peer{}.log", r)).string(),
                std::vector<std::pair<std::string, std::string>>{{"GOSSAMER_JOB_TOKEN", "t"}}));
        for (int r = 0; r < 3; ++r) {
            CAPTURE(r);
            const int status = peers[static_cast<std::size_t>(r)]->wait(60s);
            const auto log = peers[static_cast<std::size_t>(r)]->log();
            INFO(log);
            CHECK(status == 0);
            CHECK(log.find(fmt::format("[rank {}] rendezvous at 127.0.0.1:{} (--rendezvous)", r,
                                       port)) != std::string::npos);
        }
        // Rank 0 names each peer by the address it reported: --address and a kernel port.
        CHECK(peers[0]->log().find("rank 2 (127.0.0.1:") != std::string::npos);
        CHECK(read_file(out + "/average.json").find("\"survivors\": [\n    0,\n    1,\n    2\n") !=
              std::string::npos);
    }

    TEST_CASE("a taken rendezvous port is one line and exit 2 on rank 0") {
        TempDir dir;
        boost::asio::io_context io;
        boost::asio::ip::tcp::acceptor squatter(
            io, boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
        const int port = squatter.local_endpoint().port();
        const auto r = run(fmt::format(
            "{} timeout -k 5 60 '{}' peer --topology '{}' --config '{}' --rank 0 --rendezvous "
            "127.0.0.1:{} --address 127.0.0.1 --out '{}'",
            kClean, kBin, kCount4, kConfig, port, (dir.path() / "out").string()));
        INFO(r.err);
        CHECK(r.status == 2);
        std::vector<std::string> errors;
        for (const auto& l : nonempty_lines(r.err))
            if (l.find("rendezvous at") == std::string::npos) errors.push_back(l);
        REQUIRE(errors.size() == 1);
        CHECK(errors[0] ==
              fmt::format("[rank 0] could not join: rank 0 cannot listen on 127.0.0.1:{}: "
                          "address in use; the rendezvous port is taken (another job, or a "
                          "peer still running); pick another with --rendezvous-port or "
                          "GOSSAMER_RENDEZVOUS_PORT (the same for every peer) or stop the "
                          "process using it",
                          port));
    }

    TEST_CASE("bad rendezvous flags and launcher variables are one line and exit 2") {
        TempDir dir;
        const auto out = (dir.path() / "out").string();
        const std::string hosts4 = kSource + "/examples/topologies/hosts4.json";
        struct Case {
            std::string env, topology, args, says;
        };
        for (const auto& c : {
                 Case{"", hosts4, "--rank 0 --rendezvous node01",
                      "error: --rendezvous: the topology file lists every peer's host and port"},
                 Case{"", hosts4, "--rank 0 --address 10.0.0.2",
                      "error: --address: the topology file lists every peer's host and port"},
                 Case{"", kCount4, "--rank 0 --rendezvous :80",
                      "error: --rendezvous: ':80' names no host"},
                 Case{"", kCount4, "--rank 0 --rendezvous h:70000",
                      "error: --rendezvous: '70000' is not a port (1 to 65535)"},
                 Case{"", kCount4, "--rank 0 --rendezvous-port 0", "--rendezvous-port"},
                 Case{"", kCount4, "--rank 0 --rendezvous h --address 'a b'",
                      "error: --address: 'a b' is not a host name or address"},
                 Case{"", kCount4, "--rank 0 --address 10.0.0.2",
                      "error: --address: without a rendezvous"},
                 Case{"GOSSAMER_RENDEZVOUS=h:x", kCount4, "--rank 1",
                      "error: GOSSAMER_RENDEZVOUS: 'x' is not a port"},
                 Case{"SLURM_PROCID=1 SLURM_NTASKS=4 SLURM_JOB_NODELIST='n[1-'", kCount4, "",
                      "error: SLURM_JOB_NODELIST: 'n[1-' is not a Slurm node list: a '[' is "
                      "never closed"},
                 Case{"SLURM_PROCID=1 SLURM_NTASKS=5", kCount4, "",
                      "error: SLURM_NTASKS: srun started 5 peers but the topology file has 4"},
                 Case{"OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=4 "
                      "OMPI_COMM_WORLD_LOCAL_SIZE=2",
                      kCount4, "", "mpirun started the peers on several hosts"},
             }) {
            CAPTURE(c.args);
            CAPTURE(c.env);
            const auto r =
                run(fmt::format("{} {} timeout -k 5 60 '{}' peer --topology '{}' "
                                "--config '{}' --out '{}' {}",
                                kClean, c.env, kBin, c.topology, kConfig, out, c.args));
            INFO(r.err);
            CHECK(r.status == 2);
            const auto lines = nonempty_lines(r.err);
            REQUIRE(lines.size() == 1);
            CHECK(lines[0].find(c.says) != std::string::npos);
            CHECK_FALSE(fs::exists(out));
        }
    }
}
