// A job of real peers that takes checkpoints, with a crashed peer that rejoins from its own
// checkpoint (docs/operations/elastic.md, "Checkpoints"): `gossamer peer --join --resume DIR` takes
// its model from its newest checkpoint and its mass from a sponsor, the job's cuts go on without a
// deadlock, the rejoined peer writes checkpoints again from its first cut, and the whole job can
// be resumed from the checkpoints written after the rejoin.
#include <doctest/doctest.h>

#include "cluster.hpp"
// (cluster.hpp first: it includes <utility> before Boost.Asio)
#include <fmt/format.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>

#include "gossamer/peer/checkpoints.hpp"
#include "peer_job.hpp"

using namespace gossamer::test;
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kCuts = {"--checkpoint-every", "50", "--eval-samples", "0"};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

// The number after `key` in `text` (-1: not there).
long long number_after(const std::string& text, const std::string& key) {
    const auto at = text.find(key);
    return at == std::string::npos ? -1 : std::atoll(text.c_str() + at + key.size());
}

// The newest step of `rank` in the job's folder (-1: none).
std::int64_t newest(const Job& job, int rank) {
    const auto all = gossamer::peer::list_checkpoints(job.out, 4);
    const auto it = all.find(rank);
    return it == all.end() ? -1 : it->second.back();
}

// The step of the first record in a peer's metrics.
std::int64_t first_step(const Job& job, int rank) {
    std::ifstream in(job.metrics(rank));
    for (std::string line; std::getline(in, line);) {
        if (line.empty()) continue;
        const auto j = Json::parse(line);
        if (j.contains("step")) return j["step"].get<std::int64_t>();
    }
    return -1;
}

struct Rejoined {
    Json average;
    std::int64_t from = -1;   // the checkpoint step rank 2 rejoined from
    std::int64_t first = -1;  // its first checkpoint after it entered
};

// 600 steps of 10 ms, a checkpoint every 50; rank 2 is killed once it wrote its checkpoint of
// step 100 and restarted with --join --resume once the others removed it from their view and
// took 80 more steps.
Rejoined kill_and_rejoin_from_checkpoint(Job& job, const std::string& algo) {
    std::vector<std::unique_ptr<Process>> peers;
    for (int r = 0; r < 4; ++r) peers.push_back(job.start(r, algo, kToken, kCuts));
    const auto until = std::chrono::steady_clock::now() + 30s;
    while (!fs::exists(gossamer::peer::checkpoint_path(job.out, 2, 100)) &&
           std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(5ms);
    REQUIRE_MESSAGE(fs::exists(gossamer::peer::checkpoint_path(job.out, 2, 100)), peers[2]->log());
    peers[2]->kill(SIGKILL);
    CHECK(peers[2]->wait(10s) != 0);
    Rejoined out;
    out.from = newest(job, 2);
    wait_rank_2_removed(*peers[0]);
    // The others take a cut without it (a lost peer's counts are not waited for) before it
    // comes back.
    const auto on = std::chrono::steady_clock::now() + 30s;
    while (count_lines(job.metrics(1)) < out.from + 80 && std::chrono::steady_clock::now() < on)
        std::this_thread::sleep_for(10ms);
    REQUIRE_MESSAGE(count_lines(job.metrics(1)) >= out.from + 80, peers[1]->log());
    auto back = job.start(2, algo, kToken, with(kCuts, {"--join", "--resume", job.out}));
    CHECK(back->wait(90s) == 0);
    for (int r : {0, 1, 3}) {
        CAPTURE(r);
        CHECK(peers[static_cast<std::size_t>(r)]->wait(90s) == 0);
        const auto log = peers[static_cast<std::size_t>(r)]->log();
        CAPTURE(log);
        CHECK(log.find("lost peers: none") != std::string::npos);
    }
    const auto log = back->log();
    CAPTURE(log);
    // Its first model is its checkpoint's; it steps on from the job's step, past that one.
    CHECK(log.find(fmt::format("entered the running job of 4 peers ({}, its model from step {};",
                               algo, out.from)) != std::string::npos);
    const std::int64_t first = first_step(job, 2);
    MESSAGE(algo << ": rank 2 rejoined from its checkpoint of step " << out.from
                 << " and took its first step at the job's step " << first);
    CHECK(first > out.from);
    out.first = number_after(log, "first checkpoint since it entered: step ");
    MESSAGE(algo << ": its first checkpoint after it entered: step " << out.first);
    CHECK(out.first > first);
    CHECK(out.first % 50 == 0);
    CHECK(fs::exists(gossamer::peer::checkpoint_path(job.out, 2, out.first)));
    out.average = job.average();
    CHECK(out.average["survivors"] == Json::array({0, 1, 2, 3}));
    return out;
}

// The whole job restarted from DIR (on other ports): every peer resumes at the newest step all
// four hold, one written after the rejoin, and the job finishes. Returns the new average.json.
Json resume_whole_job(Job& job, const std::string& algo, std::int64_t after) {
    std::string endpoints;
    for (const auto& e : free_endpoints(4))
        endpoints += (endpoints.empty() ? "" : ", ") +
                     fmt::format(R"({{"host": "{}", "port": {}}})", e.host, e.port);
    job.topology = job.dir.write(
        "ring4-resumed.json", R"({"peers": [)" + endpoints + R"(], "graph": {"family": "ring"}})");
    std::vector<std::unique_ptr<Process>> peers;
    for (int r = 0; r < 4; ++r)
        peers.push_back(job.start(r, algo, kToken, with(kCuts, {"--resume", job.out})));
    for (int r = 0; r < 4; ++r) {
        CAPTURE(r);
        CHECK(peers[static_cast<std::size_t>(r)]->wait(90s) == 0);
        const auto log = peers[static_cast<std::size_t>(r)]->log();
        CAPTURE(log);
        const auto step = number_after(log, "resuming at step ");
        CHECK(step >= after);
    }
    const Json avg = job.average();
    CHECK(avg["survivors"] == Json::array({0, 1, 2, 3}));
    MESSAGE(algo << ": the whole job resumed at step "
                 << number_after(peers[0]->log(), "resuming at step "));
    return avg;
}

}  // namespace

TEST_SUITE("integration") {
    TEST_CASE(
        "elastic resume: async, a peer killed in a job that takes checkpoints rejoins with "
        "--join --resume and the job resumes from the cuts after it") {
        Job job(60, 0.01);
        const Rejoined run = kill_and_rejoin_from_checkpoint(job, "async");
        // The crash lost the mass rank 2 held; its rejoin took half its sponsor's: nothing is
        // created.
        const double mass = run.average["total_mass"].get<double>();
        MESSAGE("async: total mass after the crash and the rejoin: " << mass << " of 4");
        CHECK(mass <= 4.0 + 1e-9);
        CHECK(mass > 0.5);
        // A cut after the rejoin is exact: the resumed job ends with the same total mass.
        const double resumed =
            resume_whole_job(job, "async", run.first)["total_mass"].get<double>();
        MESSAGE("async: total mass of the job resumed from a cut after the rejoin: " << resumed);
        CHECK(std::abs(resumed - mass) < 1e-6);

        // Bad input, before anything joins: a folder with no checkpoint of this rank, a step it
        // does not hold, and a checkpoint of another job (other epochs).
        const std::string empty = (job.dir.path() / "empty").string();
        fs::create_directories(empty);
        auto none = job.start(2, "async", kToken, with(kCuts, {"--join", "--resume", empty}));
        CHECK(none->wait(30s) == 2);
        CHECK_MESSAGE(none->log().find(fmt::format("{} holds no checkpoint of rank 2", empty)) !=
                          std::string::npos,
                      none->log());
        auto step = job.start(2, "async", kToken,
                              with(kCuts, {"--join", "--resume", job.out, "--resume-step", "75"}));
        CHECK(step->wait(30s) == 2);
        CHECK_MESSAGE(step->log().find("step 75 is not held by rank 2 in") != std::string::npos,
                      step->log());
        job.config = job.dir.write("other.json", R"({"seed": 3,
            "data": {"name": "logreg_synthetic", "samples": 800, "test_samples": 200, "features": 10, "seed": 5},
            "model": {"name": "softmax"}, "optimizer": {"name": "sgd", "lr": 0.2},
            "training": {"epochs": 61, "batch_size": 20}})");
        const std::string other_out = job.out;
        job.out = (job.dir.path() / "out-other").string();
        auto other = job.start(2, "async", kToken, with(kCuts, {"--join", "--resume", other_out}));
        CHECK(other->wait(30s) == 2);
        CHECK_MESSAGE(other->log().find("a checkpoint of another job (") != std::string::npos,
                      other->log());
    }

    TEST_CASE(
        "elastic resume: dpsgd, a peer killed in a job that takes checkpoints rejoins with "
        "--join --resume and the job resumes from the cuts after it") {
        Job job(60, 0.01);
        const Rejoined run = kill_and_rejoin_from_checkpoint(job, "dpsgd");
        resume_whole_job(job, "dpsgd", run.first);
    }

    TEST_CASE(
        "elastic resume: async, a job that takes checkpoints started without rank 3 "
        "(--min-peers 3) cuts without it, and rank 3 --joins later and writes its own") {
        // The absent rank is no in-neighbour any cut waits for; the joiner writes from its first
        // cut after it entered; no crash, so the three starters' mass is all there.
        Job job(60, 0.01);
        std::vector<std::unique_ptr<Process>> peers;
        for (int r = 0; r < 3; ++r)
            peers.push_back(job.start(r, "async", kToken,
                                      with(kCuts, {"--min-peers", "3", "--join-timeout", "2"})));
        const auto until = std::chrono::steady_clock::now() + 30s;
        while (count_lines(job.metrics(1)) < 120 && std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(10ms);
        REQUIRE_MESSAGE(count_lines(job.metrics(1)) >= 120, peers[1]->log());
        CHECK(fs::exists(gossamer::peer::checkpoint_path(job.out, 0, 100)));
        auto late = job.start(3, "async", kToken, with(kCuts, {"--join"}));
        CHECK(late->wait(90s) == 0);
        for (int r = 0; r < 3; ++r) {
            CAPTURE(r);
            CHECK(peers[static_cast<std::size_t>(r)]->wait(90s) == 0);
        }
        const auto log = late->log();
        CAPTURE(log);
        const auto first = number_after(log, "first checkpoint since it entered: step ");
        MESSAGE("async: rank 3 joined at step " << first_step(job, 3)
                                                << ", its first checkpoint: step " << first);
        CHECK(first > first_step(job, 3));
        CHECK(fs::exists(gossamer::peer::checkpoint_path(job.out, 3, first)));
        const Json avg = job.average();
        CHECK(avg["survivors"] == Json::array({0, 1, 2, 3}));
        CHECK(std::abs(avg["total_mass"].get<double>() - 3.0) < 1e-6);
    }

    TEST_CASE(
        "elastic resume: async, SIGTERM in a job that takes checkpoints: the peer leaves with "
        "its mass handed over and the others go on cutting without it") {
        Job job(60, 0.01);
        std::vector<std::unique_ptr<Process>> peers;
        for (int r = 0; r < 4; ++r) peers.push_back(job.start(r, "async", kToken, kCuts));
        const auto until = std::chrono::steady_clock::now() + 30s;
        while (count_lines(job.metrics(3)) < 120 && std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(10ms);
        REQUIRE_MESSAGE(count_lines(job.metrics(3)) >= 120, peers[3]->log());
        peers[3]->kill(SIGTERM);
        CHECK(peers[3]->wait(30s) == 0);
        CHECK_MESSAGE(peers[3]->log().find("left the job gracefully after") != std::string::npos,
                      peers[3]->log());
        for (int r = 0; r < 3; ++r) {
            CAPTURE(r);
            CHECK(peers[static_cast<std::size_t>(r)]->wait(90s) == 0);
        }
        // The others cut at step 550 without it (a lost or gone peer is not waited for).
        CHECK(fs::exists(gossamer::peer::checkpoint_path(job.out, 0, 550)));
        const Json avg = job.average();
        CHECK(avg["survivors"] == Json::array({0, 1, 2}));
        CHECK(std::abs(avg["total_mass"].get<double>() - 4.0) < 1e-6);
    }
}
