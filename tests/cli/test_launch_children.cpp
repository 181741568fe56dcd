// The process machinery of gossamer launch (launch/child_process, launch/local_ports) with small
// shell children: logs, exit statuses and signals, the stop at a timeout, ports.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "gossamer/launch/child_process.hpp"
#include "gossamer/launch/local_ports.hpp"
#include "support/temp_dir.hpp"

using gossamer::launch::Children;
using gossamer::launch::ExitStatus;
using gossamer::test::TempDir;

namespace {

std::string slurp(const std::filesystem::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

/// Polls until every child ended or `seconds` passed; returns whether all ended.
bool wait_all(Children& kids, double seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
        kids.poll();
        if (kids.running().empty()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
}

}  // namespace

TEST_CASE("children write stdout and stderr to their log and report exit status and signal") {
    TempDir dir;
    Children kids;
    const auto log0 = dir.path() / "a.log", log1 = dir.path() / "b.log";
    kids.start({"/bin/sh", "-c", "echo out $GREETING; echo err >&2; exit 3"},
               {{"GREETING", "hello"}}, log0);
    kids.start({"/bin/sh", "-c", "kill -9 $$"}, {}, log1);
    kids.start({"/nonexistent/program"}, {}, dir.path() / "c.log");
    REQUIRE(wait_all(kids, 10));
    CHECK(kids.status(0)->code == 3);
    CHECK(describe(*kids.status(0)) == "exit status 3");
    CHECK(slurp(log0) == "out hello\nerr\n");
    CHECK(kids.status(1)->signal == SIGKILL);
    CHECK(describe(*kids.status(1)) == "killed by SIGKILL");
    CHECK(kids.status(2)->code == 127);
    CHECK(slurp(dir.path() / "c.log").find("cannot execute") != std::string::npos);
}

TEST_CASE("kill_all stops children with SIGTERM and those that ignore it with SIGKILL") {
    TempDir dir;
    Children kids;
    kids.start({"/bin/sh", "-c", "sleep 30"}, {}, dir.path() / "a.log");
    // ignores SIGTERM; its sleep is in its process group, so it goes too
    kids.start({"/bin/sh", "-c", "trap '' TERM; echo ready; sleep 30"}, {}, dir.path() / "b.log");
    const auto t0 = std::chrono::steady_clock::now();
    while (slurp(dir.path() / "b.log").empty() &&
           std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5))
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    kids.poll();
    CHECK(kids.running().size() == 2);
    kids.kill_all(0.5);
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(took < 5);
    REQUIRE(kids.running().empty());
    CHECK(kids.status(0)->signal == SIGTERM);
    CHECK(kids.status(1)->signal == SIGKILL);
}

TEST_CASE("last_lines keeps the end of a log") {
    TempDir dir;
    const auto p = dir.write("log.txt", "1\n2\n3\n4\n5\n");
    CHECK(gossamer::launch::last_lines(p, 2) == std::vector<std::string>{"4", "5"});
    CHECK(gossamer::launch::last_lines(p, 10).size() == 5);
    CHECK(gossamer::launch::last_lines(dir.path() / "missing", 3).empty());
}

TEST_CASE("local ports: a held port is busy, free_ports gives distinct free ones") {
    using namespace gossamer::launch;
    CHECK(is_local_host("127.0.0.1"));
    CHECK(is_local_host("localhost"));
    CHECK_FALSE(is_local_host("192.0.2.1"));  // TEST-NET-1: never this machine's
    const auto ports = free_ports("127.0.0.1", 4);
    REQUIRE(ports.size() == 4);
    CHECK(std::set<int>(ports.begin(), ports.end()).size() == 4);
    CHECK(port_free("127.0.0.1", ports[0]));
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<std::uint16_t>(ports[1]));
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(fd, 1) == 0);
    CHECK_FALSE(port_free("127.0.0.1", ports[1]));
    ::close(fd);
}
