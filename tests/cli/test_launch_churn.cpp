// gossamer launch following the cluster file's churn with real peers (docs/operations/elastic.md,
// "Real peers"): a rank that joins late is started at its join_at with --join, a rank at its
// fail_at again at its rejoin_at, and every peer counts fail_at and leave_at from the job's clock
// (its first step; --job-start for the ranks started later). 4 peer processes over UCX on loopback,
// the synthetic job of launch_job.hpp at 100 epochs of 10 ms steps (1000 steps, about 10 s). No ','
// in test names (doctest's filter).
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "launch_job.hpp"

using gossamer::test::LaunchJob;
using Json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

Json read_json(const fs::path& p) {
    std::ifstream in(p);
    REQUIRE_MESSAGE(in, p.string());
    return Json::parse(in);
}

// The algorithm's `options` (JSON, empty: none) in the job's training config.
void use_options(LaunchJob& job, const std::string& options) {
    if (options.empty()) return;
    job.config = job.dir.write("train-options.json", R"({"seed": 3,
        "data": {"name": "logreg_synthetic", "samples": 800, "test_samples": 200, "features": 10, "seed": 5},
        "model": {"name": "softmax"}, "optimizer": {"name": "sgd", "lr": 0.2},
        "training": {"epochs": 3, "batch_size": 20}, "algorithms": )" +
                                                         options + "}");
}

// The job's time in a peer's "emulated failure at T s" line.
double emulated_failure_at(const std::string& log) {
    const std::string said = "emulated failure at ";
    const auto at = log.find(said);
    REQUIRE(at != std::string::npos);
    return std::stod(log.substr(at + said.size()));
}

// Rank 3 joins at 2 s; rank 2 fails at 3 s and comes back at 4.5 s.
constexpr const char* kChurn = R"({"defaults": {"base_time": 0.01},
    "peers": [{"rank": 3, "join_at": 2.0}, {"rank": 2, "fail_at": 3.0, "rejoin_at": 4.5}],
    "network": {"latency": 1e-5, "bandwidth": 1e9}})";

// The launch of `algo` on kChurn: every peer exits 0, the row is ok with no lost peer, and all
// four ranks are in the average. Returns OUT/<algo>/average.json.
Json launch_with_churn(const std::string& algo, const std::string& options = "",
                       const std::string& flags = "") {
    LaunchJob job;
    job.cluster = job.dir.write("churn.json", kChurn);
    use_options(job, options);
    const auto out = job.dir.path() / "churn";
    const auto r = job.launch("--algorithms " + algo + " --epochs 100 --json --timeout 90 --out " +
                              out.string() + flags);
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    CHECK(r.err.find(algo + ": starting 3 of 4 peer processes") != std::string::npos);
    CHECK(r.err.find(algo + ": peer 2 stopped at its failure time (cluster file); it rejoins at "
                            "4.5 s") != std::string::npos);
    const auto row = Json::parse(r.out)["algorithms"][0];
    CAPTURE(row.dump());
    CHECK(row["ok"].get<bool>());
    CHECK(row["failed_peers"].get<int>() == 0);
    CHECK(row["survivors"] == Json::array({0, 1, 2, 3}));
    const auto dir = out / algo;
    const auto peers = read_json(dir / "result.json")["peers"];
    REQUIRE(peers.size() == 4);
    for (int rank = 0; rank < 4; ++rank) {
        const auto& p = peers[static_cast<std::size_t>(rank)];
        CAPTURE(p.dump());
        CHECK(p["exit"] == "exit status 0");
        CHECK(!p.contains("lost"));
        CHECK(p["joins"].get<int>() == (rank >= 2 ? 1 : 0));
    }
    // Rank 2's first process failed at the job's 3 s; its files moved to peer2.0.*.
    REQUIRE(peers[2]["earlier"].size() == 1);
    CHECK(peers[2]["earlier"][0]["exit"] == "exit status 3");
    const auto first = slurp(dir / "peer2.0.log");
    CAPTURE(first);
    const double failed_at = emulated_failure_at(first);
    CHECK(failed_at >= 3.0);
    CHECK(failed_at < 4.5);
    // A peer present at the start counts from its own first step, the job's clock.
    CHECK(first.find(" s (cluster file): exiting at once") != std::string::npos);
    CHECK(fs::exists(dir / "peer2.0.jsonl"));
    // The restarted process entered the running job and did not fail again.
    const auto second = slurp(dir / "peer2.log");
    CAPTURE(second);
    CHECK(second.find("this process does not fail again") != std::string::npos);
    // With checkpoints, from its own newest one (the launcher passed --resume).
    const bool checkpoints = flags.find("--checkpoint-every") != std::string::npos;
    CHECK((second.find("its model from step") != std::string::npos) == checkpoints);
    CHECK(second.find("entered the running job of 4 peers") != std::string::npos);
    CHECK(slurp(dir / "peer3.log").find("entered the running job of 4 peers") != std::string::npos);
    // Rank 0 did not wait for rank 3 at the start-up barrier.
    CHECK(slurp(dir / "peer0.log")
              .find("the 3 peers due at the start joined; start-up barrier passed") !=
          std::string::npos);
    const auto avg = read_json(dir / "average.json");
    CHECK(avg["survivors"] == Json::array({0, 1, 2, 3}));
    return avg;
}

// Rank 0 fails 0.2 s into training and comes back at 2 s. The job's clock starts at its first
// step, not when the launcher started the peers: starting 4 processes takes longer than 0.2 s,
// and rank 0 was skipped ('does not fail again') when the clock was the launcher's. Rank 0
// rejoins through its successor (a join may claim rank 0), which stays the coordinator.
void rank0_fails_early(const std::string& algo, const std::string& options = "") {
    LaunchJob job;
    job.cluster = job.dir.write("early.json", R"({"defaults": {"base_time": 0.01},
        "peers": [{"rank": 0, "fail_at": 0.2, "rejoin_at": 2.0}],
        "network": {"latency": 1e-5, "bandwidth": 1e9}})");
    use_options(job, options);
    const auto out = job.dir.path() / "early";
    const auto r = job.launch("--algorithms " + algo + " --epochs 100 --json --timeout 90 --out " +
                              out.string());
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    const auto dir = out / algo;
    const auto first = slurp(dir / "peer0.0.log");
    CAPTURE(first);
    const double failed_at = emulated_failure_at(first);
    CHECK(failed_at >= 0.2);
    CHECK(failed_at < 1.5);
    const auto peers = read_json(dir / "result.json")["peers"];
    for (const auto& p : peers) CHECK(p["exit"] == "exit status 0");
    CHECK(peers[0]["joins"].get<int>() == 1);
    const auto second = slurp(dir / "peer0.log");
    CAPTURE(second);
    CHECK(second.find("this process does not fail again") != std::string::npos);
    CHECK(second.find("entered the running job of 4 peers") != std::string::npos);
    // Rank 0 is back: the lowest survivor, it evaluates the average of all four.
    const auto avg = read_json(dir / "average.json");
    CHECK(avg["survivors"] == Json::array({0, 1, 2, 3}));
    // Its evaluation points are on the job's clock: the first is at the job's 2 s or later.
    std::ifstream in(dir / "peer0.jsonl");
    std::string line;
    double first_eval = -1;
    while (first_eval < 0 && std::getline(in, line))
        if (line.find("\"eval\"") != std::string::npos)
            first_eval = Json::parse(line)["time"].get<double>();
    CHECK(first_eval >= 1.5);
}

}  // namespace

TEST_SUITE("integration") {
    TEST_CASE("launch under async starts rank 3 at its join_at and restarts rank 2 at rejoin_at") {
        // Push-sum: three peers started with w = 1 each, the joiners took halves of their
        // sponsors', and the crash took what rank 2 held: Σw is 3 minus that, never more.
        const double mass = launch_with_churn("async")["total_mass"].get<double>();
        MESSAGE("total mass: " << mass << " of 3 at the start");
        CHECK(mass < 3.0 - 1e-3);
        CHECK(mass > 0.5);
    }

    TEST_CASE("launch under dpsgd starts rank 3 at its join_at and restarts rank 2 at rejoin_at") {
        launch_with_churn("dpsgd");
    }

    TEST_CASE(
        "launch under allreduce with elastic rebuild starts rank 3 at its join_at and restarts "
        "rank 2 at rejoin_at") {
        // The ring is rebuilt over the live members at each change (docs/operations/elastic.md).
        launch_with_churn("allreduce", R"({"allreduce": {"elastic": "rebuild"}})");
    }

    TEST_CASE("launch with checkpoints restarts rank 2 from its own newest checkpoint") {
        // Rank 2 wrote checkpoints every 50 steps before its failure at 3 s: the launcher starts
        // it again with --join --resume, and it takes its model from there
        // (docs/operations/elastic.md).
        const double mass =
            launch_with_churn("async", "", " --checkpoint-every 50")["total_mass"].get<double>();
        CHECK(mass < 3.0 - 1e-3);
        CHECK(mass > 0.5);
    }

    TEST_CASE("launch: a late rank leaves at the job's leave_at with its mass handed over") {
        // Rank 3 starts at the job's 2 s and leaves at the job's 4 s: about 2 s of steps, not
        // the 4 s its own clock would give (steps are padded to 10 ms: at most 400 then).
        LaunchJob job;
        job.cluster = job.dir.write("leave.json", R"({"defaults": {"base_time": 0.01},
            "peers": [{"rank": 3, "join_at": 2.0, "leave_at": 4.0}],
            "network": {"latency": 1e-5, "bandwidth": 1e9}})");
        const auto out = job.dir.path() / "leave";
        const auto r =
            job.launch("--algorithms async --epochs 100 --json --timeout 90 --out " + out.string());
        CAPTURE(r.err);
        REQUIRE(r.status == 0);
        const auto peers = read_json(out / "async" / "result.json")["peers"];
        for (const auto& p : peers) CHECK(p["exit"] == "exit status 0");
        const auto log3 = slurp(out / "async" / "peer3.log");
        CAPTURE(log3);
        CHECK(log3.find("left the job gracefully after") != std::string::npos);
        CHECK(peers[3]["steps"].get<int>() < 350);
        const auto avg = read_json(out / "async" / "average.json");
        CHECK(avg["survivors"] == Json::array({0, 1, 2}));
        // No crash: the three starting peers' mass, all of it (the leaver handed its share on).
        CHECK(std::abs(avg["total_mass"].get<double>() - 3.0) < 1e-6);
    }

    TEST_CASE("launch under async: rank 0 fails 0.2 s into the job and rejoins") {
        rank0_fails_early("async");
    }

    TEST_CASE("launch under allreduce with elastic rebuild: rank 0 fails 0.2 s in and rejoins") {
        rank0_fails_early("allreduce", R"({"allreduce": {"elastic": "rebuild"}})");
    }
}
