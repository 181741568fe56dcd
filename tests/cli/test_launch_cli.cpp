// gossamer launch as a user runs it: real peers as threads over the in-process transport
// (--inproc), and as gossamer peer processes over UCX (the integration suite).
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "launch_job.hpp"
#include "support/optional.hpp"

using gossamer::test::kBin;
using gossamer::test::LaunchJob;
using gossamer::test::run;
using Json = nlohmann::json;

namespace {

// The loss of the last evaluation in a metrics.jsonl of gossamer sim.
double last_loss(const std::string& path) {
    std::ifstream in(path);
    std::string line, last;
    while (std::getline(in, line))
        if (!line.empty()) last = line;
    REQUIRE_FALSE(last.empty());
    return Json::parse(last)["loss"].get<double>();
}

}  // namespace

TEST_CASE("launch runs allreduce and dpsgd as real peers and dpsgd ends at the loss of sim") {
    LaunchJob job;
    const auto out = (job.dir.path() / "launch").string();
    auto r = job.launch("--inproc --algorithms allreduce,dpsgd --out " + out);
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    CHECK(r.out.find("allreduce") != std::string::npos);
    CHECK(r.out.find("dpsgd") != std::string::npos);
    CHECK(r.out.find("MB sent/peer") != std::string::npos);
    for (const std::string algo : {"allreduce", "dpsgd"}) {
        CHECK(std::filesystem::exists(out + "/" + algo + "/result.json"));
        for (int rank = 0; rank < 4; ++rank) {
            const auto path = out + "/" + algo + "/peer" + std::to_string(rank) + ".jsonl";
            CAPTURE(path);
            REQUIRE(std::filesystem::exists(path));
            CHECK(std::filesystem::file_size(path) > 0);
        }
    }

    const auto json_out = (job.dir.path() / "launch_json").string();
    auto j = job.launch("--inproc --algorithms dpsgd --json --out " + json_out);
    CAPTURE(j.err);
    REQUIRE(j.status == 0);
    const auto row = Json::parse(j.out)["algorithms"][0];
    REQUIRE(row["final_loss"].is_number());
    const double real = row["final_loss"].get<double>();
    CHECK(row["mb_sent_per_peer"].get<double>() > 0);

    const auto sim_out = (job.dir.path() / "sim").string();
    auto s = run(kBin + " sim --topology " + job.topology + " --cluster " + job.cluster +
                 " --config " + job.config + " --algorithms dpsgd --out " + sim_out);
    REQUIRE(s.status == 0);
    const double simulated = last_loss(sim_out + "/dpsgd/seed0/metrics.jsonl");
    CAPTURE(real);
    CAPTURE(simulated);
    CHECK(std::isfinite(real));
    CHECK(std::abs(real / simulated - 1) < 0.05);
}

TEST_CASE("launch --inproc peers write evaluation points and the table gets the time to target") {
    LaunchJob job;
    const auto out = (job.dir.path() / "evals").string();
    auto r = job.launch("--inproc --algorithms dpsgd --json --eval-interval 0.05 --out " + out);
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    for (int rank = 0; rank < 4; ++rank) {
        std::ifstream in(out + "/dpsgd/peer" + std::to_string(rank) + ".jsonl");
        std::string line;
        std::vector<double> ticks;
        while (std::getline(in, line)) {
            const auto j = Json::parse(line);
            if (!j.contains("eval")) continue;
            CHECK(j["rank"] == rank);
            CHECK(j["accuracy"].get<double>() >= 0);
            CHECK(j["accuracy"].get<double>() <= 1);
            ticks.push_back(j["time"].get<double>());
        }
        CAPTURE(rank);
        CHECK(ticks.size() >= 2);  // tick 0 and at least one more of the 0.05 s ticks
        CHECK(std::is_sorted(ticks.begin(), ticks.end()));
    }
    // The config's target accuracy (0.6) is reached (final accuracy about 0.8): at a tick.
    const auto row = Json::parse(r.out)["algorithms"][0];
    REQUIRE(row["time_to_target"].is_number());
    const double t = row["time_to_target"].get<double>();
    CHECK(std::abs(t / 0.05 - std::round(t / 0.05)) < 1e-9);
}

TEST_CASE("launch --target-loss: the first tick at which the peers' mean loss is at most X") {
    LaunchJob job;
    const auto out = (job.dir.path() / "loss").string();
    auto r = job.launch(
        "--inproc --algorithms dpsgd --json --eval-interval 0.05 --target-loss "
        "100 --out " +
        out);
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    const auto j = Json::parse(r.out);
    CHECK(j["target_loss"].get<double>() == 100);
    CHECK_FALSE(j.contains("target"));
    // Every loss is below 100: the first tick, 0.
    CHECK(j["algorithms"][0]["time_to_target"].get<double>() == 0);
    CHECK_FALSE(j["algorithms"][0].contains("final_bpc"));  // not text data
    auto never = job.launch(
        "--inproc --algorithms dpsgd --eval-interval 0.05 --target-loss "
        "1e-9 --out " +
        out + "2");
    REQUIRE(never.status == 0);
    CHECK(never.out.find("time to loss 1e-09") != std::string::npos);
    CHECK(never.out.find("—") != std::string::npos);
    auto both = job.launch("--inproc --target 0.5 --target-loss 1 --out " + out + "3");
    CHECK(both.status == 2);
    CHECK(both.err.find("--target and --target-loss") != std::string::npos);
}

TEST_CASE("launch with an unknown algorithm is one line, exit 2, and writes nothing") {
    LaunchJob job;
    const auto out = (job.dir.path() / "o").string();
    auto r = job.launch("--algorithms allreduce,gossipx --out " + out);
    CHECK(r.status == 2);
    CHECK(r.err.find("unknown algorithm \"gossipx\"") != std::string::npos);
    CHECK(r.err.find('\n') == r.err.size() - 1);
    CHECK_FALSE(std::filesystem::exists(out));
    auto missing = run(kBin + " launch --topology " + job.topology + " --config " +
                       (job.dir.path() / "nope.json").string() + " --out " + out);
    CHECK(missing.status == 2);
    CHECK(missing.err.find('\n') == missing.err.size() - 1);
    CHECK_FALSE(std::filesystem::exists(out));
    job.config = job.dir.write("big_batch.json", R"({"seed": 3,
        "data": {"name": "logreg_synthetic", "samples": 800, "test_samples": 200, "features": 10},
        "model": {"name": "softmax"}, "optimizer": {"name": "sgd", "lr": 0.2},
        "training": {"epochs": 1, "batch_size": 500}})");
    auto batch = job.launch("--algorithms dpsgd --out " + out);
    CHECK(batch.status == 2);
    CHECK(batch.err.find("batch_size") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(out));
}

TEST_CASE("launch with bad flags or remote peers is one line, exit 2, and writes nothing") {
    LaunchJob job;
    const auto out = (job.dir.path() / "o").string();
    for (const std::string flags : {"--threads-per-peer 0", "--timeout 0", "--epochs x",
                                    "--eval-interval 0", "--eval-interval -1", "--eval-interval x",
                                    "--target 1.5", "--eval-samples 0", "--eval-samples x"}) {
        CAPTURE(flags);
        auto r = job.launch(flags + " --out " + out);
        CHECK(r.status == 2);
        CHECK(r.err.find('\n') == r.err.size() - 1);
        CHECK_FALSE(std::filesystem::exists(out));
    }
    job.topology = job.dir.write("remote.json", R"({"peers": [{"host": "127.0.0.1", "port": 29500},
        {"host": "192.0.2.7", "port": 29500}], "graph": {"family": "ring"}})");
    auto remote = job.launch("--out " + out);
    CHECK(remote.status == 2);
    CHECK(remote.err.find("192.0.2.7 is not an address of this machine") != std::string::npos);
    CHECK(remote.err.find('\n') == remote.err.size() - 1);
    CHECK_FALSE(std::filesystem::exists(out));
}

TEST_CASE("launch with churn it cannot follow is one line, exit 2, and writes nothing") {
    LaunchJob job;
    const auto out = (job.dir.path() / "o").string();
    const auto churn = [&](const std::string& peers) {
        return job.dir.write("churn.json",
                             R"({"defaults": {"base_time": 0.005}, "peers": [)" + peers +
                                 R"(], "network": {"latency": 1e-5, "bandwidth": 1e9}})");
    };
    const std::string late = R"({"rank": 3, "join_at": 1})";
    const auto script = job.dir.write("train.py", "print('hello')\n");
    const auto plain = job.config;
    const auto delay = job.dir.write("delay.json", R"({"seed": 3,
        "data": {"name": "logreg_synthetic", "samples": 800, "test_samples": 200, "features": 10},
        "model": {"name": "softmax"}, "optimizer": {"name": "sgd", "lr": 0.2},
        "training": {"epochs": 1, "batch_size": 20}, "algorithms": {"dpsgd": {"delay": 1}}})");
    struct Case {
        std::string peers, config, flags, says;
    };
    const std::vector<Case> cases = {
        // algorithms that cannot join or leave, by name and by option
        {late, plain, "--algorithms async,allreduce",
         "train.json: algorithms.allreduce: the cluster " + job.dir.path().string() +
             "/churn.json has churn, and algorithm allreduce stops when a peer fails"},
        {R"({"rank": 1, "leave_at": 1})", plain, "--algorithms sgp",
         "churn.json: peers: algorithm sgp cannot join"},
        {late, delay, "--algorithms dpsgd", "delay.json: algorithms.dpsgd: the cluster"},
        // launches that cannot start peers late
        {late, plain, "--algorithms async --inproc", "--inproc: the cluster file"},
        {R"({"rank": 1, "leave_at": 1})", plain, "--algorithms async --inproc",
         "--inproc: the cluster file"},
        {late, plain, "--algorithms async --script " + script, "--script: the cluster file"},
        {late, plain, "--algorithms async --resume " + out, "--resume: the cluster file"},
        {R"({"rank": 0, "join_at": 1})", plain, "--algorithms async",
         "churn.json: peers: rank 0 joins at 1 s"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.flags);
        job.cluster = churn(c.peers);
        job.config = c.config;
        const bool resume = c.flags.find("--resume") != std::string::npos;
        auto r = job.launch(c.flags + (resume ? std::string() : " --out " + out));
        CAPTURE(r.err);
        CHECK(r.status == 2);
        CHECK(r.err.find(c.says) != std::string::npos);
        CHECK(r.err.find('\n') == r.err.size() - 1);
        CHECK_FALSE(std::filesystem::exists(out));
    }
}

TEST_CASE("gossamer peer with a bad --job-start is one line and exit 2") {
    LaunchJob job;
    const auto now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    struct Case {
        std::string value;
        bool cluster;
        std::string says;
    };
    for (const auto& c :
         std::vector<Case>{{"0", true, "is not a time"},
                           {"-5", true, "is not a time"},
                           {"soon", true, "--job-start"},
                           {fmt::format("{:.0f}", now + 3600), true, "in the future"},
                           {fmt::format("{:.0f}", now), false, "give --cluster"}}) {
        CAPTURE(c.value);
        auto r = run("GOSSAMER_JOB_TOKEN=t " + kBin + " peer --rank 0 --topology " + job.topology +
                     " --config " + job.config + " --out " + (job.dir.path() / "p").string() +
                     (c.cluster ? " --cluster " + job.cluster : std::string()) + " --job-start " +
                     c.value);
        CAPTURE(r.err);
        CHECK(r.status == 2);
        CHECK(r.err.find("--job-start") != std::string::npos);
        CHECK(r.err.find(c.says) != std::string::npos);
        CHECK(r.err.find('\n') == r.err.size() - 1);
    }
}

TEST_CASE("gossamer peer with a bad --eval-interval is one line and exit 2") {
    LaunchJob job;
    for (const std::string value : {"0", "-2", "soon"}) {
        CAPTURE(value);
        auto r = run("GOSSAMER_JOB_TOKEN=t " + kBin + " peer --rank 0 --topology " + job.topology +
                     " --config " + job.config + " --out " + (job.dir.path() / "p").string() +
                     " --eval-interval " + value);
        CHECK(r.status == 2);
        CHECK(r.err.find("--eval-interval") != std::string::npos);
        CHECK(r.err.find('\n') == r.err.size() - 1);
    }
}

TEST_CASE("launch --inproc emulates a cluster file failure: dpsgd carries on, allreduce exits 1") {
    LaunchJob job;
    job.cluster = job.dir.write("fail.json", R"({"defaults": {"base_time": 0.005},
        "peers": [{"rank": 1, "fail_at": 0.05}], "network": {"latency": 1e-5, "bandwidth": 1e9}})");
    auto gossip =
        job.launch("--inproc --algorithms dpsgd --json --out " + (job.dir.path() / "g").string());
    CAPTURE(gossip.err);
    REQUIRE(gossip.status == 0);
    const auto row = Json::parse(gossip.out)["algorithms"][0];
    CHECK(row["failed_peers"].get<int>() == 1);
    CHECK(row["final_accuracy"].get<double>() > 0.6);
    auto ar =
        job.launch("--inproc --algorithms allreduce --out " + (job.dir.path() / "a").string());
    CHECK(ar.status == 1);
    CHECK(ar.err.find("peer 1 failed") != std::string::npos);
}

TEST_CASE("launch: an --out that cannot be created is one line, exit 2, before any peer runs") {
    LaunchJob job;
    const auto file = job.dir.write("a_file", "mine");
    for (const std::string& out : {file, file + "/sub", std::string("/proc/gossamer-test/out")}) {
        CAPTURE(out);
        auto r = job.launch("--inproc --algorithms dpsgd --out " + out);
        CAPTURE(r.err);
        CHECK(r.status == 2);
        CHECK(r.err.rfind("error: --out: ", 0) == 0);
        CHECK(r.err.find(out) != std::string::npos);
        CHECK(r.err.find('\n') == r.err.size() - 1);
    }
    std::ifstream in(file);
    std::string text;
    in >> text;
    CHECK(text == "mine");
}

TEST_CASE("launch keeps what a user wrote: refused, and an earlier launch's OUT is replaced") {
    LaunchJob job;
    const auto out = job.dir.path() / "out";
    std::filesystem::create_directories(out / "dpsgd");
    job.dir.write("out/dpsgd/notes.txt", "keep me");
    auto mine = job.launch("--inproc --algorithms dpsgd --out " + out.string());
    CAPTURE(mine.err);
    CHECK(mine.status == 2);
    CHECK(mine.err.find("is not empty and holds no .gossamer-output marker") != std::string::npos);
    CHECK(mine.err.find('\n') == mine.err.size() - 1);
    CHECK(std::filesystem::exists(out / "dpsgd/notes.txt"));  // nothing deleted
    const auto runs = job.dir.path() / "runs";
    REQUIRE(job.launch("--inproc --algorithms dpsgd --out " + runs.string()).status == 0);
    CHECK(std::filesystem::exists(runs / ".gossamer-output"));
    CHECK(std::filesystem::exists(runs / "dpsgd/.gossamer-output"));  // the peers' folder
    auto again = job.launch("--inproc --algorithms allreduce --out " + runs.string());
    CAPTURE(again.err);
    REQUIRE(again.status == 0);
    CHECK(again.err.find("note: replacing the earlier Gossamer output in " + runs.string() +
                         " (written by gossamer launch at ") != std::string::npos);
    CHECK(std::filesystem::exists(runs / "allreduce/result.json"));
    CHECK_FALSE(std::filesystem::exists(runs / "dpsgd"));
}

// Peer 2 computes four times slower (30 steps of 80 ms against 20 ms): its neighbours 1 and 3
// wait for it.
constexpr const char* kStraggler2 = R"({"defaults": {"base_time": 0.02},
    "peers": [{"rank": 2, "factor": 4}], "network": {"latency": 1e-5, "bandwidth": 1e9}})";

TEST_CASE(
    "launch --inproc --live prints the per-peer table naming the slowest peer in plain lines") {
    LaunchJob job;
    job.cluster = job.dir.write("straggler.json", kStraggler2);
    const auto out = job.dir.path() / "launch";
    auto r = job.launch("--inproc --algorithms dpsgd --live --out " + out.string());
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    // The table as the peers left it: a header and a row per peer, after the "done" line.
    const auto done = r.err.find("dpsgd: done, slowest peer 2 at 30 steps");
    REQUIRE(done != std::string::npos);
    const auto header = r.err.find("waits most for", done);
    REQUIRE(header != std::string::npos);
    const bool edge = r.err.find("most waited on: 2->1", done) != std::string::npos ||
                      r.err.find("most waited on: 2->3", done) != std::string::npos;
    CHECK(edge);
    // Peers 1 and 3 wait for peer 2 most; the rows are "peer steps s/step idle whom".
    CHECK(r.err.find("peer 2 (", header) != std::string::npos);
    for (int p = 0; p < 4; ++p)
        CHECK(r.err.find(fmt::format("\n{:>5} {:>7} ", p, 30), header) != std::string::npos);
    CHECK(r.err.find("\x1b[") == std::string::npos);  // plain lines, never redrawn in place
}

TEST_CASE("launch --inproc --live on a terminal (tmux) redraws the table in place") {
    if (!gossamer::test::have_component("tmux", gossamer::test::missing_program("tmux", "tmux")))
        return;
    LaunchJob job;
    job.cluster = job.dir.write("straggler.json", kStraggler2);
    const auto out = job.dir.path() / "launch";
    const std::string session = fmt::format("gossamer-live-inproc-{}", ::getpid());
    struct Kill {  // the session goes however the test ends
        std::string name;
        ~Kill() { std::system(("tmux kill-session -t " + name + " 2>/dev/null").c_str()); }
    } kill{session};
    // 60 steps of 80 ms for peer 2: the table is redrawn a few times while the peers run.
    const std::string cmd = kBin + " launch --inproc --no-plots --topology " + job.topology +
                            " --config " + job.config + " --cluster " + job.cluster +
                            " --algorithms dpsgd --epochs 6 --timeout 60 --live --out " +
                            out.string() + "; echo launch-exit=$?; sleep 60";
    REQUIRE(run("tmux new-session -d -x 160 -y 40 -s " + session + " '" + cmd + "'").status == 0);
    std::string screen;
    bool seen_running = false;  // a table drawn while the peers ran
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < until) {
        screen = run("tmux capture-pane -p -t " + session).out;
        if (screen.find("peers, ") != std::string::npos &&
            screen.find("waits most for") != std::string::npos)
            seen_running = true;
        if (screen.find("launch-exit=") != std::string::npos) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    CAPTURE(screen);
    CHECK(screen.find("launch-exit=0") != std::string::npos);
    CHECK(seen_running);
    CHECK(screen.find("slowest peer 2") != std::string::npos);
    // Redrawn in place: the table's header is on the screen once.
    CHECK(screen.find("waits most for") == screen.rfind("waits most for"));
}
