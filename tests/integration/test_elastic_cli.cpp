// Elastic jobs of real peers (docs/operations/elastic.md): a peer killed and restarted with --join
// enters the running job again and is in its result; a peer sent SIGTERM leaves gracefully with its
// mass handed over, and the others finish with all of it; dpsgd rejoins and leaves too.
#include <doctest/doctest.h>

#include "cluster.hpp"
// (cluster.hpp first: it includes <utility> before Boost.Asio)
#include <fmt/format.h>

#include <csignal>
#include <string>

#include "peer_job.hpp"

using namespace gossamer::test;

namespace {

// Each joiner says how it entered.
void check_entered(const Process& p, const std::string& algo) {
    const auto log = p.log();
    CAPTURE(log);
    CHECK(log.find(fmt::format("entered the running job of 4 peers ({}, a sponsor's model",
                               algo)) != std::string::npos);
}

// Waits for `ranks` to end with status 0, each log holding `text` (or, with `absent`, not
// holding it).
void check_finished(const std::vector<std::unique_ptr<Process>>& peers,
                    const std::vector<int>& ranks, const std::string& text, bool absent = false) {
    for (int r : ranks) {
        CAPTURE(r);
        CHECK(peers[static_cast<std::size_t>(r)]->wait(90s) == 0);
        const auto log = peers[static_cast<std::size_t>(r)]->log();
        CAPTURE(log);
        CHECK((log.find(text) == std::string::npos) == absent);
    }
}

// 600 steps of 10 ms; rank 2 is killed after 40 and restarted with --join once the others
// installed the view without it. Returns average.json.
Json kill_and_rejoin(const std::string& algo) {
    Job job(60, 0.01);
    auto peers = start_training(job, algo, 2);
    peers[2]->kill(SIGKILL);
    // The others declare it lost (its reset connection) and install the view without it.
    wait_rank_2_removed(*peers[0]);
    auto back = job.start(2, algo, kToken, {"--join"});
    CHECK(back->wait(90s) == 0);
    check_entered(*back, algo);
    check_finished(peers, {0, 1, 3}, "lost peers: none");
    const Json avg = job.average();
    CHECK(avg["survivors"] == Json::array({0, 1, 2, 3}));
    return avg;
}

// Ranks 0-2 started with --min-peers 3 (rank 3 never comes in time); rank 3 --joins once rank 1
// has 40 steps. Returns average.json; `log0` gets rank 0's log.
Json start_without_rank_3(const std::string& algo, std::string& log0) {
    Job job(60, 0.01);
    std::vector<std::unique_ptr<Process>> peers;
    for (int r = 0; r < 3; ++r)
        peers.push_back(job.start(r, algo, kToken, {"--min-peers", "3", "--join-timeout", "2"}));
    const auto until = std::chrono::steady_clock::now() + 30s;
    while (count_lines(job.metrics(1)) < 40 && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(10ms);
    REQUIRE_MESSAGE(count_lines(job.metrics(1)) >= 40, peers[0]->log());
    auto late = job.start(3, algo, kToken, {"--join"});
    CHECK(late->wait(90s) == 0);
    check_entered(*late, algo);
    check_finished(peers, {0, 1, 2}, "lost peers: none");
    log0 = peers[0]->log();
    const Json avg = job.average();
    CHECK(avg["survivors"] == Json::array({0, 1, 2, 3}));
    return avg;
}

// SIGTERM to rank 3 once it has 40 steps. Returns average.json.
Json sigterm_leave(const std::string& algo) {
    Job job(60, 0.01);
    auto peers = start_training(job, algo, 3);
    peers[3]->kill(SIGTERM);
    CHECK(peers[3]->wait(30s) == 0);
    const auto log3 = peers[3]->log();
    CAPTURE(log3);
    CHECK(log3.find("left the job gracefully after") != std::string::npos);
    check_finished(peers, {0, 1, 2}, "vanished", true);
    const Json avg = job.average();
    CHECK(avg["survivors"] == Json::array({0, 1, 2}));
    return avg;
}

}  // namespace

TEST_SUITE("integration") {
    TEST_CASE(
        "elastic: a peer killed and restarted with --join is back in the job and in its "
        "result") {
        // The crash lost the mass rank 2 held; the joiner took half its sponsor's: nothing is
        // created.
        const double mass = kill_and_rejoin("async")["total_mass"].get<double>();
        MESSAGE("total mass after the crash and the rejoin: " << mass << " of 4");
        CHECK(mass < 4.0);
        CHECK(mass > 0.5);
    }

    TEST_CASE(
        "elastic: a job started with --min-peers 3 without rank 3, which enters later "
        "with --join") {
        std::string log0;
        const Json avg = start_without_rank_3("async", log0);
        CHECK(log0.find("3 of 4 peers joined within 2 s; starting without the others") !=
              std::string::npos);
        // Three peers started with w = 1 each; the joiner took half of its sponsor's.
        CHECK(std::abs(avg["total_mass"].get<double>() - 3.0) < 1e-6);
    }

    TEST_CASE(
        "elastic: SIGTERM makes an async peer leave gracefully with its mass handed over, "
        "and the others finish with all of it") {
        // Push-sum: the leaver's whole mass went to its neighbours.
        CHECK(std::abs(sigterm_leave("async")["total_mass"].get<double>() - 4.0) < 1e-6);
    }

    TEST_CASE("elastic: the cluster file's leave_at makes a real peer leave gracefully") {
        Job job(60, 0.01, R"("peers": [{"rank": 1, "leave_at": 1.5}],)");
        std::vector<std::unique_ptr<Process>> peers;
        for (int r = 0; r < 4; ++r) peers.push_back(job.start(r, "async"));
        for (int r = 0; r < 4; ++r) {
            CAPTURE(r);
            CHECK(peers[static_cast<std::size_t>(r)]->wait(90s) == 0);
        }
        const auto log1 = peers[1]->log();
        CAPTURE(log1);
        CHECK(log1.find("left the job gracefully after") != std::string::npos);
        const Json avg = job.average();
        CHECK(avg["survivors"] == Json::array({0, 2, 3}));
        CHECK(std::abs(avg["total_mass"].get<double>() - 4.0) < 1e-6);
        // An algorithm that cannot leave is refused before it joins.
        auto refused = job.start(1, "allreduce");
        CHECK(refused->wait(30s) == 2);
        CHECK_MESSAGE(
            refused->log().find("rank 1's leave_at: algorithm allreduce stops when a "
                                "peer fails or leaves unless its options say") != std::string::npos,
            refused->log());
    }

    TEST_CASE(
        "elastic: --join with an algorithm that cannot, and with no job running, is one "
        "line each") {
        Job job(3, 0.005);
        auto refused = job.start(1, "allreduce", kToken, {"--join"});
        CHECK(refused->wait(30s) == 2);
        CHECK_MESSAGE(refused->log().find("--join: algorithm allreduce stops when a peer fails") !=
                          std::string::npos,
                      refused->log());
        auto nobody = job.start(1, "async", kToken, {"--join", "--join-timeout", "1"});
        CHECK(nobody->wait(30s) != 0);
        const auto log = nobody->log();
        CAPTURE(log);
        CHECK(log.find("no running job to join") != std::string::npos);
    }

    TEST_CASE("elastic: under dpsgd a peer killed and restarted with --join is back in the job") {
        kill_and_rejoin("dpsgd");
    }

    TEST_CASE("elastic: SIGTERM makes a dpsgd peer leave gracefully and the others finish") {
        sigterm_leave("dpsgd");
    }

    TEST_CASE("elastic: under dpsgd a job started with --min-peers 3 lets rank 3 --join later") {
        std::string log0;
        start_without_rank_3("dpsgd", log0);
    }
}
