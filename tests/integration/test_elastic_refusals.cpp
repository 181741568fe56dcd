// Joins an elastic job refuses (docs/operations/elastic.md, "Real peers"): a peer whose settings
// differ from the running job's, and a --join to a job whose result is written, are one line and
// exit 2.
#include <doctest/doctest.h>

#include "cluster.hpp"
// (cluster.hpp first: it includes <utility> before Boost.Asio)
#include <fmt/format.h>

#include <csignal>
#include <string>

#include "peer_job.hpp"

using namespace gossamer::test;

TEST_SUITE("integration") {
    TEST_CASE("elastic: a --join with other settings than the running job's is one line") {
        Job job(60, 0.01);
        auto peers = start_training(job, "async", 0);
        peers[2]->kill(SIGKILL);  // its port is free again for the joiner below
        wait_rank_2_removed(*peers[0]);
        // The same job but another learning rate: the handshake's digest differs.
        Job other(60, 0.01);
        other.topology = job.topology;
        other.cluster = job.cluster;
        other.config = other.dir.write("train-other.json", R"({"seed": 3,
            "data": {"name": "logreg_synthetic", "samples": 800, "test_samples": 200, "features": 10, "seed": 5},
            "model": {"name": "softmax"}, "optimizer": {"name": "sgd", "lr": 0.3},
            "training": {"epochs": 60, "batch_size": 20}})");
        auto refused = other.start(2, "async", kToken, {"--join", "--join-timeout", "10"});
        CHECK(refused->wait(30s) == 2);
        const auto log = refused->log();
        CAPTURE(log);
        CHECK(log.find("was refused by") != std::string::npos);
        CHECK(log.find("optimizer") != std::string::npos);
        for (int r : {0, 1, 3}) peers[static_cast<std::size_t>(r)]->kill(SIGKILL);
    }

    TEST_CASE("elastic: a --join to a job whose result is written is one line, exit 2") {
        Job job(2, 0.002);
        std::vector<std::unique_ptr<Process>> peers;
        for (int r = 0; r < 4; ++r) peers.push_back(job.start(r, "async"));
        for (auto& p : peers) CHECK(p->wait(60s) == 0);
        REQUIRE(job.average()["job_id"] == 9);
        auto late = job.start(2, "async", kToken, {"--join"});
        CHECK(late->wait(30s) == 2);
        const auto log = late->log();
        CAPTURE(log);
        CHECK(log.find("--join: job 9 is over: its result is written") != std::string::npos);
        CHECK(log.find("survivors [0,1,2,3]") != std::string::npos);
    }
}
