// gossamer launch with real peers: gossamer peer processes over UCX on loopback, a job of a few
// seconds each (tests/cli/launch_job.hpp). No ',' in test names: doctest's --test-case filter,
// which labels the tests, splits at commas.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "launch_job.hpp"
#include "support/optional.hpp"

using gossamer::test::kBin;
using gossamer::test::LaunchJob;
using gossamer::test::run;
using Json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// The pid of the `gossamer peer` process of `rank` whose --out lies under `out`, from
// /proc/PID/cmdline (the launcher starts the peers; the test only finds them).
std::optional<pid_t> peer_pid(const fs::path& out, int rank) {
    for (const auto& e : fs::directory_iterator("/proc")) {
        const auto name = e.path().filename().string();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        std::ifstream in(e.path() / "cmdline");
        std::vector<std::string> args;
        for (std::string a; std::getline(in, a, '\0');) args.push_back(a);
        bool is_peer = false, has_rank = false, has_out = false;
        for (std::size_t i = 0; i + 1 < args.size(); ++i) {
            is_peer = is_peer || args[i] == "peer";
            has_rank = has_rank || (args[i] == "--rank" && args[i + 1] == std::to_string(rank));
            has_out = has_out || (args[i] == "--out" && args[i + 1].rfind(out.string(), 0) == 0);
        }
        if (is_peer && has_rank && has_out) return static_cast<pid_t>(std::stoi(name));
    }
    return std::nullopt;
}

Json read_json(const fs::path& p) {
    std::ifstream in(p);
    REQUIRE(in);
    return Json::parse(in);
}

/// The evaluation lines of OUT/<algo>/peer<r>.jsonl: tick -> accuracy.
std::map<long, double> evals_of(const fs::path& jsonl) {
    std::ifstream in(jsonl);
    std::map<long, double> out;
    long last = -1;
    for (std::string line; std::getline(in, line);) {
        const auto j = Json::parse(line);
        if (!j.contains("eval")) continue;
        const long k = j["eval"].get<long>();
        CHECK(k > last);  // increasing ticks
        last = k;
        CHECK(j["time"].get<double>() <= j["at"].get<double>() + 1e-9);
        out[k] = j["accuracy"].get<double>();
    }
    return out;
}

/// Rank 1 fails after 50 ms of its 150 ms of steps.
constexpr const char* kFailingCluster = R"({"defaults": {"base_time": 0.005},
    "peers": [{"rank": 1, "fail_at": 0.05}], "network": {"latency": 1e-5, "bandwidth": 1e9}})";

}  // namespace

TEST_SUITE("integration") {
    TEST_CASE(
        "launch runs peer processes and writes the table and result.json and logs and plots") {
        LaunchJob job;
        const auto out = job.dir.path() / "launch";
        auto r = run(kBin + " launch --topology " + job.topology + " --config " + job.config +
                     " --cluster " + job.cluster +
                     " --algorithms allreduce,dpsgd --threads-per-peer 2 --timeout 60 --out " +
                     out.string());
        CAPTURE(r.err);
        REQUIRE(r.status == 0);
        CHECK(r.out.find("MB sent/peer") != std::string::npos);
        const auto summary = read_json(out / "result.json");
        CHECK(summary["transport"] == "ucx");
        REQUIRE(summary["algorithms"].size() == 2);
        for (const auto& row : summary["algorithms"]) {
            CAPTURE(row.dump());
            CHECK(row["ok"].get<bool>());
            REQUIRE(row["final_accuracy"].is_number());
            CHECK(row["final_accuracy"].get<double>() > 0.6);
            CHECK(row["mb_sent_per_peer"].get<double>() > 0);
            CHECK(row["failed_peers"].get<int>() == 0);
            const auto algo = row["algorithm"].get<std::string>();
            // the peers' BLAS threads travel in a copy of the config
            CHECK(read_json(out / algo / "config.json")["training"]["threads"] == 2);
            const auto per_algo = read_json(out / algo / "result.json");
            REQUIRE(per_algo["peers"].size() == 4);
            for (const auto& peer : per_algo["peers"]) {
                CHECK(peer["exit"] == "exit status 0");
                CHECK(peer["steps"].get<int>() == 30);
                CHECK(fs::exists(peer["log"].get<std::string>()));
            }
        }
        // The plots: with matplotlib (a base package of scripts/deps.sh) they are written;
        // without it the launch says so in one warning line, and the case is a skip.
        const bool matplotlib =
            run("/usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1").status == 0;
        if (gossamer::test::have_component(
                "matplotlib", matplotlib ? ""
                                         : "/usr/bin/python3 cannot import matplotlib "
                                           "(scripts/deps.sh installs python3-matplotlib)")) {
            CHECK_MESSAGE(r.err.find("warning: no plots") == std::string::npos, r.err);
            CHECK(fs::exists(out / "loss.png"));
            CHECK(fs::exists(out / "idle.png"));
        } else {
            CHECK(r.err.find("warning: no plots") != std::string::npos);
        }
    }

    TEST_CASE(
        "launch names a failed allreduce peer with its exit status and log lines and exits 1") {
        LaunchJob job;
        job.cluster = job.dir.write("fail.json", kFailingCluster);
        const auto out = job.dir.path() / "a";
        auto r = job.launch("--algorithms allreduce --timeout 60 --out " + out.string());
        CAPTURE(r.err);
        CHECK(r.status == 1);
        CHECK(r.err.find("peer 1 stopped at its failure time") != std::string::npos);
        // the survivors gave up on the dead rank: each is named with its status and its log's end
        CHECK(r.err.find("allreduce: peer 0 failed: exit status 1; last lines of") !=
              std::string::npos);
        CHECK(r.err.find("    ") != std::string::npos);
        CHECK(read_json(out / "result.json")["algorithms"][0]["ok"] == false);
    }

    TEST_CASE("launch --trace merges the timelines of the peer processes into one file") {
        LaunchJob job;
        const auto out = job.dir.path() / "launch";
        const auto file = out / "trace.json";
        auto r = job.launch("--algorithms dpsgd --timeout 60 --out " + out.string() + " --trace " +
                            file.string());
        CAPTURE(r.err);
        REQUIRE(r.status == 0);
        const auto doc = read_json(file);
        std::map<int, std::pair<double, double>> traced;  // rank -> (steps, waits) seconds
        for (const auto& e : doc["traceEvents"]) {
            const std::string cat = e.value("cat", "");
            if (cat == "step") traced[e["pid"].get<int>()].first += e["dur"].get<double>() / 1e6;
            if (cat == "wait") traced[e["pid"].get<int>()].second += e["dur"].get<double>() / 1e6;
        }
        CHECK(traced.size() == 4);
        CHECK(doc["otherData"]["files"].size() == 4);
        // Every peer's clock offset to rank 0, from its bootstrap round trips: one host, so
        // the true offset is 0 and the estimate is within its residual. The merged file says
        // it aligned by them and states the worst residual.
        const auto& other = doc["otherData"];
        CHECK(other["clock"].get<std::string>() ==
              "steady, aligned to rank 0's system clock by offsets estimated at the bootstrap");
        REQUIRE(other.contains("clock_residual_us"));
        double worst = 0;
        for (const auto& f : other["files"]) {
            const auto& od = f["otherData"];
            const int rank = od["rank"].get<int>();
            CAPTURE(rank);
            REQUIRE(od.contains("clock_offset"));
            const auto& c = od["clock_offset"];
            const double offset = c["offset_us"].get<double>(),
                         res = c["residual_us"].get<double>();
            CHECK(c["round_trips"].get<int>() == (rank == 0 ? 0 : 8));
            if (rank == 0) {
                CHECK(offset == 0);
                CHECK(res == 0);
            } else {
                CHECK(res > 0);
                CHECK(res < 1e6);  // loopback: well under a second even on a loaded machine
                CHECK(std::abs(offset) <= res);
            }
            // The shift is the start on rank 0's clock against the earliest start.
            CHECK(f["shift_us"].get<double>() ==
                  doctest::Approx(od["origin_unix_us"].get<double>() + offset -
                                  other["origin_unix_us"].get<double>())
                      .epsilon(1e-12));
            worst = std::max(worst, res);
        }
        CHECK(other["clock_residual_us"].get<double>() == worst);
        for (int rank = 0; rank < 4; ++rank) {
            CAPTURE(rank);
            Json summary;
            std::ifstream in(out / "dpsgd" / fmt::format("peer{}.jsonl", rank));
            for (std::string line; std::getline(in, line);)
                if (line.find("\"summary\"") != std::string::npos) summary = Json::parse(line);
            REQUIRE(summary.is_object());
            const double busy = summary["busy"].get<double>(), idle = summary["idle"].get<double>();
            CHECK(std::abs(traced[rank].first - busy) <= 0.01 * busy);
            CHECK(std::abs(traced[rank].second - idle) <= 0.01 * std::max(idle, 1e-3));
        }
    }

    // Peer 2 computes four times slower (30 steps of 80 ms against 20 ms): its neighbours 1 and
    // 3 wait for it.
    constexpr const char* kStraggler2 = R"({"defaults": {"base_time": 0.02},
        "peers": [{"rank": 2, "factor": 4}], "network": {"latency": 1e-5, "bandwidth": 1e9}})";

    TEST_CASE("launch --live prints a per-peer table naming the slowest peer when not a terminal") {
        LaunchJob job;
        job.cluster = job.dir.write("straggler.json", kStraggler2);
        const auto out = job.dir.path() / "launch";
        auto r = job.launch("--algorithms dpsgd --timeout 60 --live --out " + out.string());
        CAPTURE(r.err);
        REQUIRE(r.status == 0);
        CHECK(r.err.find("waits most for") != std::string::npos);
        CHECK(r.err.find("slowest peer 2 at 30 steps") != std::string::npos);
        const bool edge = r.err.find("most waited on: 2->1") != std::string::npos ||
                          r.err.find("most waited on: 2->3") != std::string::npos;
        CHECK(edge);
        CHECK(r.err.find("\x1b[") == std::string::npos);  // plain lines
    }

    TEST_CASE(
        "launch --live on a terminal (tmux) shows the slowest peer of a run with a straggler") {
        if (!gossamer::test::have_component("tmux",
                                            gossamer::test::missing_program("tmux", "tmux")))
            return;
        LaunchJob job;
        job.cluster = job.dir.write("straggler.json", kStraggler2);
        const auto out = job.dir.path() / "launch";
        const std::string session = fmt::format("gossamer-live-{}", ::getpid());
        struct Kill {  // the session goes however the test ends
            std::string name;
            ~Kill() { std::system(("tmux kill-session -t " + name + " 2>/dev/null").c_str()); }
        } kill{session};
        const std::string cmd = kBin + " launch --no-plots --topology " + job.topology +
                                " --config " + job.config + " --cluster " + job.cluster +
                                " --algorithms dpsgd --timeout 60 --live --out " + out.string() +
                                "; echo launch-exit=$?; sleep 60";
        REQUIRE(run("tmux new-session -d -x 160 -y 40 -s " + session + " '" + cmd + "'").status ==
                0);
        std::string screen;
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (std::chrono::steady_clock::now() < until) {
            screen = run("tmux capture-pane -p -t " + session).out;
            if (screen.find("launch-exit=") != std::string::npos) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
        }
        CAPTURE(screen);
        CHECK(screen.find("launch-exit=0") != std::string::npos);
        CHECK(screen.find("waits most for") != std::string::npos);
        CHECK(screen.find("slowest peer 2") != std::string::npos);
        // Redrawn in place: the table's header is on the screen once.
        CHECK(screen.find("waits most for") == screen.rfind("waits most for"));
    }

    TEST_CASE("a healthy launch prints no endpoint errors and no warnings at the end of the job") {
        LaunchJob job;
        const auto out = job.dir.path() / "healthy";
        auto r = job.launch("--algorithms dpsgd --timeout 60 --out " + out.string());
        CAPTURE(r.err);
        REQUIRE(r.status == 0);
        std::string logs = r.err;
        for (int p = 0; p < 4; ++p)
            logs += slurp(out / "dpsgd" / ("peer" + std::to_string(p) + ".log"));
        CAPTURE(logs);
        CHECK(logs.find("endpoint") == std::string::npos);
        CHECK(logs.find("Endpoint timeout") == std::string::npos);
        CHECK(logs.find("[gossamer warn]") == std::string::npos);
        CHECK(logs.find("lost peers: none") != std::string::npos);
    }

    TEST_CASE("a 1-peer job prints no raw UCX error") {
        LaunchJob job;
        job.topology = job.dir.write(
            "one.json", gossamer::test::fresh_topology(1, R"("graph": {"family": "complete"})"));
        const auto out = job.dir.path() / "one";
        auto r = job.launch("--algorithms dpsgd --timeout 60 --out " + out.string());
        CAPTURE(r.err);
        REQUIRE(r.status == 0);
        const auto log = slurp(out / "dpsgd" / "peer0.log");
        CAPTURE(log);
        CHECK(log.find("UCX") == std::string::npos);
        CHECK(r.err.find("UCX") == std::string::npos);
        CHECK(log.find("lost peers: none") != std::string::npos);
    }

    TEST_CASE("launch reports the first tick whose mean peer accuracy reaches the target") {
        LaunchJob job;
        const auto out = job.dir.path() / "reach";
        const double interval = 0.02, target = 0.6;
        auto r = job.launch(
            "--algorithms dpsgd --timeout 60 --eval-interval 0.02 --target 0.6 "
            "--out " +
            out.string());
        CAPTURE(r.err);
        REQUIRE(r.status == 0);
        CHECK(r.out.find("time to 60.0%") != std::string::npos);
        // Recomputed from the peers' lines: the mean over the peers evaluated at each tick and,
        // every peer having finished, those done before it at their latest evaluation.
        std::vector<std::map<long, double>> peers;
        std::set<long> ticks;
        for (int rank = 0; rank < 4; ++rank) {
            auto evals = evals_of(out / "dpsgd" / ("peer" + std::to_string(rank) + ".jsonl"));
            CHECK(evals.size() >= 3);
            peers.emplace_back(evals.begin(), evals.end());
            for (const auto& [k, acc] : evals) ticks.insert(k);
        }
        std::optional<double> expected;
        for (long k : ticks) {
            double sum = 0;
            int count = 0;
            for (const auto& e : peers) {
                auto at = e.upper_bound(k);  // the latest evaluation at or before k
                if (at == e.begin()) continue;
                sum += std::prev(at)->second;
                ++count;
            }
            if (!expected && count && sum / count >= target) expected = k * interval;
        }
        REQUIRE(expected);
        const auto row = read_json(out / "dpsgd" / "result.json");
        REQUIRE(row["time_to_target"].is_number());
        CHECK(row["time_to_target"].get<double>() == doctest::Approx(*expected).epsilon(1e-9));

        const auto never = job.dir.path() / "never";
        auto n = job.launch(
            "--algorithms dpsgd --timeout 60 --eval-interval 0.02 --target 1 "
            "--out " +
            never.string());
        CAPTURE(n.err);
        REQUIRE(n.status == 0);
        CHECK(n.out.find("time to 100.0%") != std::string::npos);
        CHECK(n.out.find("—") != std::string::npos);
        CHECK(read_json(never / "dpsgd" / "result.json")["time_to_target"].is_null());
    }

    TEST_CASE("launch under dpsgd tolerates the cluster file failure and names the lost peer") {
        LaunchJob job;
        job.cluster = job.dir.write("fail.json", kFailingCluster);
        const auto out = job.dir.path() / "g";
        auto r = job.launch("--algorithms dpsgd --json --timeout 60 --out " + out.string());
        CAPTURE(r.err);
        REQUIRE(r.status == 0);
        CHECK(r.err.find("dpsgd: peer 1 stopped at its failure time") != std::string::npos);
        const auto row = Json::parse(r.out)["algorithms"][0];
        CHECK(row["failed_peers"].get<int>() == 1);
        CHECK(row["final_accuracy"].get<double>() > 0.6);
    }

    TEST_CASE("launch counts a peer cut off from the job (exit 4) as a lost peer") {
        // Rank 2 is stopped past the heartbeat timeout: the others declare it lost and finish;
        // resumed, it learns it was expelled and exits 4 without a result. The table counts
        // it as lost and the algorithm's row stays ok (the majority wrote the result).
        LaunchJob job;
        job.cluster = job.dir.write("slow.json", R"({"defaults": {"base_time": 0.05},
        "network": {"latency": 1e-5, "bandwidth": 1e9}})");
        const auto out = job.dir.path() / "cut";
        gossamer::test::RunResult r;
        std::thread launcher([&] {
            r = job.launch("--algorithms async --json --epochs 20 --timeout 90 --out " +
                           out.string());
        });
        std::optional<pid_t> pid;
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (std::chrono::steady_clock::now() < until) {
            std::ifstream lines(out / "async" / "peer2.jsonl");
            int count = 0;
            for (std::string l; std::getline(lines, l);) ++count;
            if (count >= 10 && (pid = peer_pid(out, 2))) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        const bool found = pid.has_value();
        if (found) {
            ::kill(*pid, SIGSTOP);
            std::this_thread::sleep_for(std::chrono::seconds(8));  // past the 5 s timeout
            ::kill(*pid, SIGCONT);
        }
        launcher.join();
        REQUIRE(found);
        CAPTURE(r.err);
        CHECK(r.status == 0);
        CHECK(r.err.find("async: peer 2 was cut off from the job (exit status 4): [rank 2] ") !=
              std::string::npos);
        const auto row = Json::parse(r.out)["algorithms"][0];
        CHECK(row["failed_peers"].get<int>() == 1);
        const auto per_algo = read_json(out / "async" / "result.json");
        CHECK(per_algo["peers"][2]["lost"] == "cut off");
        CHECK(read_json(out / "async" / "average.json")["survivors"] == Json::array({0, 1, 3}));
    }

    TEST_CASE("launch stops the peers at the job timeout and names those still running") {
        LaunchJob job;
        job.cluster = job.dir.write("slow.json", R"({"defaults": {"base_time": 1.0},
        "network": {"latency": 1e-5, "bandwidth": 1e9}})");
        const auto out = job.dir.path() / "t";
        const auto t0 = std::chrono::steady_clock::now();
        // allreduce: SIGTERM ends its peers (async and dpsgd peers leave gracefully on it).
        auto r = job.launch("--algorithms allreduce --timeout 3 --out " + out.string());
        const double took =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        CAPTURE(r.err);
        CHECK(r.status == 1);
        CHECK(took < 20);
        CHECK(r.err.find("job timeout after 3 s (--timeout): peers 0, 1, 2, 3 still running") !=
              std::string::npos);
        CHECK(r.err.find("allreduce: peer 3 stopped by the launcher: killed by SIGTERM; last lines "
                         "of") != std::string::npos);
        CHECK(read_json(out / "result.json")["algorithms"][0]["failed_peers"] == 0);
    }

    TEST_CASE("launch moves the peers to free ports when the topology's are taken") {
        LaunchJob job;
        // Hold a port (the children inherit it) and make it rank 2's in the topology file.
        const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
        REQUIRE(::listen(fd, 1) == 0);
        socklen_t len = sizeof addr;
        REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
        const int held = ntohs(addr.sin_port);
        REQUIRE(held > 1026);
        job.topology = job.dir.write("ring4.json", R"({"peers": {"count": 4, "base_port": )" +
                                                       std::to_string(held - 2) +
                                                       R"(}, "graph": {"family": "ring"}})");
        const auto out = job.dir.path() / "p";
        auto r = job.launch("--algorithms dpsgd --timeout 60 --out " + out.string());
        ::close(fd);
        CAPTURE(r.err);
        REQUIRE(r.status == 0);
        CHECK(r.err.find("is taken: the peers use") != std::string::npos);
        const auto topo = read_json(out / "dpsgd" / "topology.json");
        REQUIRE(topo["peers"].size() == 4);
        CHECK(topo["peers"][2]["port"] != held);
        CHECK(topo["graph"]["family"] == "ring");
    }

    TEST_CASE("Ctrl-C stops the launch and its peers with exit 130 and no peer left running") {
        LaunchJob job;
        job.cluster = job.dir.write("slow.json", R"({"defaults": {"base_time": 1.0},
        "network": {"latency": 1e-5, "bandwidth": 1e9}})");
        const auto out = (job.dir.path() / "i").string();
        // Waits (at most 10 s) for the peers' first steps, interrupts the launcher, then looks for
        // peers of this job ("[p]eer" does not match this script's own command line).
        auto r = run("sh -c '" + kBin + " launch --no-plots --topology " + job.topology +
                     " --config " + job.config + " --cluster " + job.cluster +
                     " --algorithms dpsgd --out " + out + " & p=$!; i=0; while [ ! -s " + out +
                     "/dpsgd/peer3.jsonl ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; "
                     "kill -INT $p; wait $p; echo rc=$?; sleep 0.2; "
                     "if pgrep -f \"[p]eer --topology .*--out " +
                     out + "\" >/dev/null; then echo orphans; else echo clean; fi'");
        CAPTURE(r.err);
        CHECK(r.out == "rc=130\nclean\n");
        CHECK(r.err.find("dpsgd: interrupted (SIGINT): stopping peers 0, 1, 2, 3") !=
              std::string::npos);
    }

    TEST_CASE(
        "launch under dpsgd survives a peer killed with SIGKILL and names it with its signal") {
        LaunchJob job;
        job.cluster = job.dir.write("slow.json", R"({"defaults": {"base_time": 0.05},
        "network": {"latency": 1e-5, "bandwidth": 1e9}})");
        const auto out = (job.dir.path() / "k").string();
        // Kills rank 2 (found by its command line, which holds this test's own folder) once it
        // logged a step.
        auto r = run("sh -c '" + kBin + " launch --no-plots --json --timeout 60 --topology " +
                     job.topology + " --config " + job.config + " --cluster " + job.cluster +
                     " --algorithms dpsgd --out " + out + " & p=$!; i=0; while [ ! -s " + out +
                     "/dpsgd/peer2.jsonl ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; "
                     "kill -KILL $(pgrep -f \"[p]eer --topology .* --rank 2 .*--out " +
                     out + "/dpsgd\"); wait $p; echo rc=$? >&2'");
        CAPTURE(r.err);
        CHECK(r.err.find("rc=0") != std::string::npos);
        CHECK(r.err.find("dpsgd: peer 2 failed: killed by SIGKILL; last lines of") !=
              std::string::npos);
        const auto row = Json::parse(r.out)["algorithms"][0];
        CHECK(row["failed_peers"].get<int>() == 1);
        CHECK(row["final_accuracy"].is_number());
    }

}  // TEST_SUITE
