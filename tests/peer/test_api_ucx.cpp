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

#include "support/ports.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

namespace {

using gossamer::test::free_ports;
using gossamer::test::TempDir;

std::string read_file(const std::filesystem::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// A ring of n peers on free loopback ports, as a topology file in `dir`.
std::string ring_file(const TempDir& dir, int n) {
    std::string peers;
    for (int port : free_ports(n))
        peers += fmt::format("{}{{\"host\": \"127.0.0.1\", \"port\": {}}}",
                             peers.empty() ? "" : ", ", port);
    return dir.write("ring.json", fmt::format(R"({{"version": 1, "peers": [{}],
        "graph": {{"family": "ring"}}, "weights": "uniform"}})",
                                              peers));
}

struct ProcessRun {
    std::vector<int> status;
    std::vector<std::string> out, err;
};

// Starts custom_loop once per rank, all at once, each bounded by 100 s. With kill >= 0, that
// rank gets SIGKILL (by its process id) after `kill_after` seconds; with `pause_for` > 0 it gets
// SIGSTOP instead, and SIGCONT `pause_for` seconds later (no `timeout` around that rank: the
// signals must reach custom_loop itself).
ProcessRun run_job(const TempDir& dir, const std::string& topology, int n, const std::string& args,
                   int kill = -1, double kill_after = 0, double pause_for = 0) {
    const std::string d = dir.path().string();
    std::string script;
    for (int r = 0; r < n; ++r) {
        const auto cmd = fmt::format(
            "GOSSAMER_JOB_TOKEN=api-test {} '{}' --topology '{}' --rank {} {} >'{}/out{}' "
            "2>'{}/err{}'",
            r == kill ? "" : "timeout 100", CUSTOM_LOOP_BINARY, topology, r, args, d, r, d, r);
        if (r == kill && pause_for > 0)
            script += fmt::format(
                "( {} & p=$!; sleep {}; kill -STOP $p; sleep {}; kill -CONT $p; wait $p; "
                "echo $? >'{}/rc{}' ) & ",
                cmd, kill_after, pause_for, d, r);
        else if (r == kill)
            script += fmt::format(
                "( {} & p=$!; sleep {}; kill -KILL $p; wait $p; "
                "echo $? >'{}/rc{}' ) & ",
                cmd, kill_after, d, r);
        else
            script += fmt::format("( {}; echo $? >'{}/rc{}' ) & ", cmd, d, r);
    }
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
    TEST_CASE(
        "examples/custom_loop: 4 processes over UCX finish and agree under allreduce and dpsgd "
        "with and without the exact average") {
        const int n = 4;
        for (const std::string algorithm : {"allreduce", "dpsgd", "dpsgd --average"}) {
            CAPTURE(algorithm);
            TempDir dir;
            const auto topology = ring_file(dir, n);
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
                if (algorithm != "dpsgd") {  // averaged updates, or the exact average
                    CHECK(checksum[r] == checksum[0]);
                    CHECK(final_loss[r] == final_loss[0]);
                } else {  // gossip: close, not equal
                    CHECK(std::abs(final_loss[r] - final_loss[0]) < 0.02);
                }
            }
        }
    }

    TEST_CASE(
        "examples/custom_loop over UCX: a peer paused past its loss is told it is no longer a "
        "member") {
        // gossamer::Peer applies gossamer peer's membership rules (docs/modules/peer.md): rank 2,
        // stopped for 8 s, was declared lost; resumed, its step() throws NotMember and it exits
        // 1, while the others average without it.
        const int n = 4, paused = 2;
        TempDir dir;
        const auto topology = ring_file(dir, n);
        const auto res = run_job(dir, topology, n, "--steps 20000 --algorithm dpsgd --average",
                                 paused, 1.0, 8.0);
        CAPTURE(res.err[paused]);
        CHECK(res.status[paused] == 1);
        CHECK(res.err[paused].find("the job's coordinator declared this peer lost (") !=
              std::string::npos);
        CHECK(res.err[paused].find("exiting without a result") != std::string::npos);
        CHECK(res.out[paused].find("steps, test loss") == std::string::npos);
        for (int r = 0; r < n; ++r) {
            if (r == paused) continue;
            CAPTURE(r);
            CAPTURE(res.err[r]);
            CHECK(res.status[r] == 0);
            CHECK(res.out[r].find("20000 steps, test loss") != std::string::npos);
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

TEST_SUITE("integration") {
    TEST_CASE("examples/custom_loop over UCX: a peer killed under allreduce stops every other") {
        const int n = 4, dead = 2;
        TempDir dir;
        const auto topology = ring_file(dir, n);
        const auto t0 = std::chrono::steady_clock::now();
        const auto res =
            run_job(dir, topology, n, "--steps 1000000 --algorithm allreduce", dead, 1.5);
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        CHECK(res.status[dead] == 128 + 9);
        bool named = false;
        for (int r = 0; r < n; ++r) {
            if (r == dead) continue;
            CAPTURE(r);
            CAPTURE(res.err[r]);
            CHECK(res.status[r] == 1);  // the job failed, not a usage error and not a timeout
            CHECK(res.err[r].find("custom_loop: peer ") != std::string::npos);
            CHECK(res.err[r].find("failed: all-reduce on rank") != std::string::npos);
            named = named || res.err[r].find("custom_loop: peer 2 failed") != std::string::npos;
        }
        CHECK(named);  // a neighbour of the dead peer names it
        CHECK(seconds < 30);
    }
}
