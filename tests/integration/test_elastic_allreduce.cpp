// The all-reduce baseline in an elastic job of real peers (docs/algorithms/allreduce.md, "Elastic
// jobs"): with "elastic": "rebuild" a peer killed and restarted with --join is back in the ring, a
// peer sent SIGTERM leaves, and the others finish.
#include <doctest/doctest.h>

#include "cluster.hpp"
// (cluster.hpp first: it includes <utility> before Boost.Asio)
#include <fmt/format.h>

#include <csignal>
#include <string>

#include "peer_job.hpp"

using namespace gossamer::test;

namespace {

// The Job of peer_job.hpp with all-reduce's membership option in its training config.
void set_policy(Job& job, const std::string& policy) {
    job.config = job.dir.write("train-elastic.json", fmt::format(R"({{"seed": 3,
            "data": {{"name": "logreg_synthetic", "samples": 800, "test_samples": 200, "features": 10, "seed": 5}},
            "model": {{"name": "softmax"}}, "optimizer": {{"name": "sgd", "lr": 0.2, "momentum": 0.9}},
            "training": {{"epochs": 60, "batch_size": 20}},
            "algorithms": {{"allreduce": {{"elastic": "{}"}}}}}})",
                                                                 policy));
}

void check_finished(const std::vector<std::unique_ptr<Process>>& peers,
                    const std::vector<int>& ranks) {
    for (int r : ranks) {
        CAPTURE(r);
        const int status = peers[static_cast<std::size_t>(r)]->wait(90s);
        const auto log = peers[static_cast<std::size_t>(r)]->log();
        CAPTURE(log);
        CHECK(status == 0);
    }
}

}  // namespace

TEST_SUITE("integration") {
    TEST_CASE(
        "elastic allreduce: a peer killed and restarted with --join is back in the rebuilt "
        "ring, and the job ends with all four") {
        Job job(60, 0.01);
        set_policy(job, "rebuild");
        auto peers = start_training(job, "allreduce", 2);
        peers[2]->kill(SIGKILL);
        wait_rank_2_removed(*peers[0]);
        auto back = job.start(2, "allreduce", kToken, {"--join"});
        CHECK(back->wait(90s) == 0);
        const auto log2 = back->log();
        CAPTURE(log2);
        CHECK(log2.find("entered the running job of 4 peers (allreduce") != std::string::npos);
        check_finished(peers, {0, 1, 3});
        const Json avg = job.average();
        CHECK(avg["survivors"] == Json::array({0, 1, 2, 3}));
        CHECK(avg["accuracy"].get<double>() > 0.6);
    }

    TEST_CASE("elastic allreduce: SIGTERM makes a peer leave, and the ring of the others ends") {
        Job job(60, 0.01);
        set_policy(job, "rebuild");
        auto peers = start_training(job, "allreduce", 3);
        peers[3]->kill(SIGTERM);
        CHECK(peers[3]->wait(30s) == 0);
        const auto log3 = peers[3]->log();
        CAPTURE(log3);
        CHECK(log3.find("left the job gracefully after") != std::string::npos);
        check_finished(peers, {0, 1, 2});
        const Json avg = job.average();
        CHECK(avg["survivors"] == Json::array({0, 1, 2}));
        CHECK(avg["accuracy"].get<double>() > 0.6);
    }

    TEST_CASE("elastic allreduce: a bad membership option is one line before anything runs") {
        Job job(60, 0.01);
        set_policy(job, "regrow");
        auto p = job.start(0, "allreduce");
        CHECK(p->wait(30s) == 2);
        const auto log = p->log();
        CAPTURE(log);
        CHECK(log.find("algorithms.allreduce.elastic") != std::string::npos);
    }
}
