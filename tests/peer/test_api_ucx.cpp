// examples/custom_loop as 4 real processes over UCX on 127.0.0.1 (the TCP bootstrap at free
// ports of a temporary topology file): they finish and agree.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "support/run.hpp"
#include "support/temp_dir.hpp"

namespace {

using gossamer::test::TempDir;

// n ports the kernel says are free now (all held open together, so they differ).
std::vector<int> free_ports(int n) {
    std::vector<int> fds, ports;
    for (int i = 0; i < n; ++i) {
        const int fd = socket(AF_INET, SOCK_STREAM, 0);
        REQUIRE(fd >= 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = 0;
        REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        socklen_t len = sizeof a;
        REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
        fds.push_back(fd);
        ports.push_back(ntohs(a.sin_port));
    }
    for (int fd : fds) close(fd);
    return ports;
}

std::string read_file(const std::filesystem::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

struct ProcessRun {
    std::vector<int> status;
    std::vector<std::string> out, err;
};

// Starts custom_loop once per rank, all at once, each bounded by `timeout` seconds.
ProcessRun run_job(const TempDir& dir, const std::string& topology, int n,
                   const std::string& args) {
    std::string script;
    for (int r = 0; r < n; ++r)
        script += fmt::format(
            "( GOSSAMER_JOB_TOKEN=api-test timeout 100 '{}' --topology '{}' --rank {} {} "
            ">'{}/out{}' 2>'{}/err{}'; echo $? >'{}/rc{}' ) & ",
            CUSTOM_LOOP_BINARY, topology, r, args, dir.path().string(), r, dir.path().string(), r,
            dir.path().string(), r);
    gossamer::test::run(script + "wait");
    ProcessRun out;
    for (int r = 0; r < n; ++r) {
        const auto rc = read_file(dir.path() / fmt::format("rc{}", r));
        out.status.push_back(rc.empty() ? -1 : std::stoi(rc));
        out.out.push_back(read_file(dir.path() / fmt::format("out{}", r)));
        out.err.push_back(read_file(dir.path() / fmt::format("err{}", r)));
    }
    return out;
}

}  // namespace

TEST_SUITE("integration") {
    TEST_CASE("examples/custom_loop: 4 processes over UCX finish and agree under allreduce and dpsgd") {
        const int n = 4;
        for (const std::string algorithm : {"allreduce", "dpsgd"}) {
            CAPTURE(algorithm);
            TempDir dir;
            std::string peers;
            for (int port : free_ports(n))
                peers += fmt::format("{}{{\"host\": \"127.0.0.1\", \"port\": {}}}",
                                     peers.empty() ? "" : ", ", port);
            const auto topology = dir.write(
                "ring4.json",
                fmt::format(R"({{"version": 1, "peers": [{}], "graph": {{"family": "ring"}},
                                "weights": "uniform"}})",
                            peers));
            const auto res = run_job(dir, topology, n, "--steps 200 --algorithm " + algorithm);
            const std::regex line(
                R"(rank (\d): 200 steps, test loss ([0-9.]+) -> ([0-9.]+), accuracy ([0-9.]+), model checksum ([-0-9.]+); \w+: (\d+) rounds)");
            std::vector<double> final_loss, checksum;
            for (int r = 0; r < n; ++r) {
                CAPTURE(r);
                CAPTURE(res.out[r]);
                CAPTURE(res.err[r]);
                CHECK(res.status[r] == 0);
                std::smatch m;
                REQUIRE(std::regex_search(res.out[r], m, line));
                CHECK(std::stoi(m[1]) == r);
                CHECK(std::stod(m[3]) < 0.8 * std::stod(m[2]));  // it learned
                CHECK(std::stoi(m[6]) >= 200);                   // it communicated
                final_loss.push_back(std::stod(m[3]));
                checksum.push_back(std::stod(m[5]));
            }
            for (int r = 1; r < n; ++r) {
                CAPTURE(r);
                if (algorithm == "allreduce") {  // averaged updates: the very same model
                    CHECK(checksum[r] == checksum[0]);
                    CHECK(final_loss[r] == final_loss[0]);
                } else {  // gossip: close, not equal
                    CHECK(std::abs(final_loss[r] - final_loss[0]) < 0.02);
                }
            }
        }
    }

    TEST_CASE("examples/custom_loop: a rank outside the topology file is one line and exit 2") {
        TempDir dir;
        const auto topology = dir.write(
            "ring4.json",
            R"({"version": 1, "peers": {"count": 4, "host": "127.0.0.1", "base_port": 29600},
                "graph": {"family": "ring"}, "weights": "uniform"})");
        const auto r = gossamer::test::run(
            fmt::format("'{}' --topology '{}' --rank 7", CUSTOM_LOOP_BINARY, topology));
        CHECK(r.status == 2);
        CAPTURE(r.err);
        CHECK(r.err.find("7") != std::string::npos);
        CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
        CHECK(r.out.empty());
    }
}
