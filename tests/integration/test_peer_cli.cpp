// gossamer peer as users start it: one process per rank over UCX on 127.0.0.1 with free
// ports, a wrong job token, a peer killed with SIGKILL, bad input.
#include <doctest/doctest.h>

#include "cluster.hpp"
// (cluster.hpp first: it includes <utility> before Boost.Asio)
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "gossamer/core/model_file.hpp"
#include "peer_job.hpp"
#include "processes.hpp"
#include "support/run.hpp"
#include "support/sim_loss.hpp"
#include "support/temp_dir.hpp"

using namespace gossamer::test;
using namespace std::chrono_literals;
using Json = nlohmann::json;

namespace {

// The job's 4 peers under `algo`; rank 2 is stopped (SIGSTOP: alive, connections open,
// silent, so only heartbeats tell) once it has 40 metric lines, and ranks 0, 1 and 3 must finish
// without it. Returns the peers, rank 2 still stopped.
std::vector<std::unique_ptr<Process>> stop_rank_2(const Job& job, const std::string& algo) {
    auto peers = start_training(job, algo, 2);
    peers[2]->kill(SIGSTOP);
    for (int r : {0, 1, 3}) {
        CAPTURE(r);
        const int status = peers[r]->wait(40s);
        const std::string log = peers[r]->log();
        CAPTURE(log);
        CHECK(status == 0);
        CHECK(log.find("lost peers: 2") != std::string::npos);
    }
    return peers;
}

// Rank 2 stays stopped (SIGSTOP) until the others have declared it lost, finished and
// written the result, then resumed (SIGCONT): it must find that it was paused, write nothing and
// exit with status 4, leaving the survivors' average.json and model.bin as they were.
void paused_past_its_loss(const std::string& algo) {
    Job job(20, 0.01);  // 200 steps of 10 ms
    auto peers = stop_rank_2(job, algo);
    REQUIRE(job.average()["survivors"] == Json::array({0, 1, 3}));
    const std::string average = read_file(job.out + "/average.json");
    const std::string model = read_file(job.out + "/model.bin");
    REQUIRE_FALSE(model.empty());

    peers[2]->kill(SIGCONT);
    const int status = peers[2]->wait(30s);
    const std::string log = peers[2]->log();
    CAPTURE(log);
    CHECK(status == 4);
    const auto said = log.find("[rank 2] this peer was paused for ");
    REQUIRE(said != std::string::npos);
    // Rank 0's expelled notice was waiting in its socket when it resumed.
    CHECK(log.find("heartbeat timeout to declare it lost); the job's coordinator declared this "
                   "peer lost (rank 2 (",
                   said) != std::string::npos);
    CHECK(log.find("the job carried on without it: exiting without a result", said) !=
          std::string::npos);
    CHECK(log.find("average of ranks") == std::string::npos);
    CHECK(log.find("finished ") == std::string::npos);
    CHECK(job.average()["survivors"] == Json::array({0, 1, 3}));
    CHECK(read_file(job.out + "/average.json") == average);
    CHECK(read_file(job.out + "/model.bin") == model);
    CHECK_FALSE(std::filesystem::exists(job.out + "/average.json.tmp"));
    CHECK_FALSE(std::filesystem::exists(job.out + "/model.bin.tmp"));
}

}  // namespace

TEST_SUITE("integration") {
    TEST_CASE("4 peers over UCX train dpsgd to the final loss of gossamer sim") {
        Job job;
        std::vector<std::unique_ptr<Process>> peers;
        for (int r = 0; r < 4; ++r) peers.push_back(job.start(r, "dpsgd"));
        for (int r = 0; r < 4; ++r) {
            CAPTURE(peers[r]->log());
            CHECK(peers[r]->wait(60s) == 0);
        }
        const Json avg = job.average();
        CHECK(avg["survivors"] == Json::array({0, 1, 2, 3}));
        CHECK(std::filesystem::file_size(job.out + "/model.bin") > 0);
        CHECK(job.summary(1)["steps"] == 30);

        const auto sim_out = (job.dir.path() / "sim").string();
        auto s = run(kBin + " sim --topology " + job.topology + " --config " + job.config +
                     " --cluster " + job.cluster + " --algorithms dpsgd --out " + sim_out);
        REQUIRE_MESSAGE(s.status == 0, s.err);
        const double sim_loss = sim_final_loss(sim_out, "dpsgd");
        REQUIRE(sim_loss > 0);
        const double loss = avg["loss"].get<double>();
        CHECK_MESSAGE(std::abs(loss - sim_loss) <= 0.01 * sim_loss,
                      "peers " << loss << ", sim " << sim_loss);
    }

    TEST_CASE("a peer with the wrong job token is refused while the right peers train on") {
        // Security (docs/operations/reliability.md): the token travels in the environment or a file
        // (rank 1: --token-file), and shows in no command line (ps), log, metric or output.
        Job job;
        const std::string token_file = job.dir.write("token", kToken + "\n");
        std::vector<std::unique_ptr<Process>> peers;
        for (int r = 0; r < 3; ++r)
            peers.push_back(r == 1
                                ? job.start(r, "dpsgd", "from-a-file", {"--token-file", token_file})
                                : job.start(r, "dpsgd"));
        auto intruder = job.start(3, "dpsgd", kWrongToken);
        const int refused = intruder->wait(20s);
        CHECK(refused == 2);
        const std::string said = intruder->log();
        CHECK_MESSAGE(said.find("job token does not match") != std::string::npos, said);
        CHECK_MESSAGE(lines_of(said) == 1, said);
        peers.push_back(job.start(3, "dpsgd"));
        for (const auto& p : peers) {
            const std::string cmdline = read_file(fmt::format("/proc/{}/cmdline", p->pid()));
            CHECK(cmdline.find("tok-") == std::string::npos);
        }
        for (int r = 0; r < 4; ++r) {
            CAPTURE(peers[r]->log());
            CHECK(peers[r]->wait(60s) == 0);
        }
        CHECK(job.average()["survivors"].size() == 4);
        int scanned = 0;
        for (const auto& e : std::filesystem::recursive_directory_iterator(job.dir.path())) {
            if (!e.is_regular_file() || e.path().filename() == "token") continue;
            CAPTURE(e.path().string());
            const std::string text = read_file(e.path().string());
            CHECK(text.find(kToken) == std::string::npos);
            CHECK(text.find(kWrongToken) == std::string::npos);
            ++scanned;
        }
        CHECK(scanned >= 10);  // 5 logs, 4 metric files, average.json, model.bin, ...
    }

    TEST_CASE("a peer killed with SIGKILL: gossip finishes without it and all-reduce stops") {
        for (const std::string algo : {"async", "dpsgd", "allreduce"}) {
            CAPTURE(algo);
            Job job(20, 0.01);  // 200 steps of 10 ms
            // Kill rank 2 mid-run: its metrics (flushed per step) show how far it got.
            auto peers = start_training(job, algo, 2);
            peers[2]->kill(SIGKILL);
            const auto killed = std::chrono::steady_clock::now();
            for (int r : {0, 1, 3}) {
                CAPTURE(r);
                const int status = peers[r]->wait(40s);
                const std::string log = peers[r]->log();
                CAPTURE(log);
                if (algo == "allreduce") {
                    CHECK(status == 1);
                    CHECK(log.find("peer 2 failed") != std::string::npos);
                    CHECK(std::chrono::steady_clock::now() - killed < 15s);
                } else {
                    CHECK(status == 0);
                    const auto failed = job.summary(r)["failed_peers"];
                    CHECK(std::find(failed.begin(), failed.end(), 2) != failed.end());
                    CHECK(log.find("lost peers: 2") != std::string::npos);
                }
            }
            if (algo != "allreduce") {
                CHECK(job.average()["survivors"] == Json::array({0, 1, 3}));
                CHECK(job.average()["lost"] == Json::array({2}));
            }
        }
    }

    TEST_CASE("a SIGKILLed peer is reported with the real cause, not as an endpoint timeout") {
        for (const std::string algo : {"dpsgd", "allreduce"}) {
            CAPTURE(algo);
            Job job(20, 0.01);  // 200 steps of 10 ms
            auto peers = start_training(job, algo, 2);
            peers[2]->kill(SIGKILL);
            for (int r : {0, 1, 3}) {
                CAPTURE(r);
                const int status = peers[r]->wait(40s);
                const std::string log = peers[r]->log();
                CAPTURE(log);
                CHECK(status == (algo == "allreduce" ? 1 : 0));
                CHECK(log.find("Endpoint timeout") == std::string::npos);
                CHECK(log.find("endpoint error") == std::string::npos);
                // The line that names the loss says the process went away.
                const auto named =
                    log.find(algo == "allreduce" ? "peer 2 failed: " : "lost peers: 2");
                REQUIRE(named != std::string::npos);
                const auto line = log.substr(named, log.find('\n', named) - named);
                CHECK_MESSAGE(line.find("went away") != std::string::npos, line);
            }
        }
    }

    TEST_CASE("a hung peer (SIGSTOP) is found by the heartbeats and gossip finishes without it") {
        for (const std::string algo : {"async", "dpsgd"}) {
            CAPTURE(algo);
            Job job(20, 0.01);
            auto peers = stop_rank_2(job, algo);
            CHECK(job.average()["survivors"] == Json::array({0, 1, 3}));
            peers[2]->kill(SIGKILL);
        }
    }

    TEST_CASE("a peer paused past its loss (SIGSTOP, SIGCONT) writes nothing and exits 4: async") {
        paused_past_its_loss("async");
    }

    TEST_CASE("a peer paused past its loss (SIGSTOP, SIGCONT) writes nothing and exits 4: dpsgd") {
        paused_past_its_loss("dpsgd");
    }

    TEST_CASE("a job split in two halves (ranks 2 and 3 paused) writes no result on either side") {
        Job job(20, 0.01);  // 200 steps of 10 ms
        auto peers = start_training(job, "dpsgd", 3);
        peers[2]->kill(SIGSTOP);
        peers[3]->kill(SIGSTOP);
        for (int r : {0, 1}) {
            CAPTURE(r);
            const int status = peers[r]->wait(40s);
            const std::string log = peers[r]->log();
            CAPTURE(log);
            CHECK(status == 4);
            // Rank 0 lost both but neither acknowledged a view without the other: view 0 stands.
            CHECK(log.find(fmt::format("[rank {}] not writing a result: this peer can reach only 2 "
                                       "of the 4 peers of the job's view 0 (ranks 0, 1, 2, 3; "
                                       "reachable: 0, 1); a result needs a majority (3)",
                                       r)) != std::string::npos);
        }
        for (int r : {2, 3}) peers[r]->kill(SIGCONT);
        for (int r : {2, 3}) {
            CAPTURE(r);
            const int status = peers[r]->wait(30s);
            CAPTURE(peers[r]->log());
            CHECK(status == 4);
        }
        CHECK_FALSE(std::filesystem::exists(job.out + "/average.json"));
        CHECK_FALSE(std::filesystem::exists(job.out + "/model.bin"));
    }

    TEST_CASE("a job of 4 that loses 2 peers one after the other still writes its result") {
        // Rank 3 dies, rank 0 installs the view {0, 1, 2}; then rank 2 dies: {0, 1} is a
        // majority of that view (not of the 4 the job started with), so it writes the result.
        Job job(20, 0.01);  // 200 steps of 10 ms
        auto peers = start_training(job, "async", 3);
        peers[3]->kill(SIGKILL);
        const auto installed = std::chrono::steady_clock::now() + 10s;
        while (peers[0]->log().find("view 1 installed: ranks 0, 1, 2") == std::string::npos &&
               std::chrono::steady_clock::now() < installed)
            std::this_thread::sleep_for(10ms);
        REQUIRE_MESSAGE(
            peers[0]->log().find("view 1 installed: ranks 0, 1, 2") != std::string::npos,
            peers[0]->log());
        peers[2]->kill(SIGKILL);
        for (int r : {0, 1}) {
            CAPTURE(r);
            const int status = peers[r]->wait(40s);
            const std::string log = peers[r]->log();
            CAPTURE(log);
            CHECK(status == 0);
            CHECK(log.find("lost peers: 2, 3") != std::string::npos);
        }
        CHECK(job.average()["survivors"] == Json::array({0, 1}));
        CHECK(std::filesystem::exists(job.out + "/model.bin"));
    }

    TEST_CASE(
        "rank 0 killed, then a peer hung: the new coordinator relays the second loss and "
        "the job writes one result") {
        // Chaos seed 1 job 15 and seed 2 job 0 (docs/operations/reliability.md): with rank 0 gone
        // nobody relayed the next loss, and the survivors waited for the hung peer in the final
        // average. Now rank 1 takes over (docs/modules/bootstrap.md, "Succession").
        for (const std::string algo : {"async", "dpsgd"}) {
            CAPTURE(algo);
            Job job(40, 0.01);  // 400 steps of 10 ms
            auto peers = start_training(job, algo, 3);
            peers[0]->kill(SIGKILL);
            const auto until = std::chrono::steady_clock::now() + 10s;
            // Rank 3 is stopped once it follows rank 1 (view 1 installed): stopped before, the
            // job is split (2 of the 4 of view 0) and rightly writes nothing.
            const std::string installed = "view 1 installed: ranks 1, 2, 3";
            while (peers[1]->log().find(installed) == std::string::npos &&
                   std::chrono::steady_clock::now() < until)
                std::this_thread::sleep_for(10ms);
            REQUIRE_MESSAGE(peers[1]->log().find(installed) != std::string::npos, peers[1]->log());
            peers[3]->kill(SIGSTOP);
            for (int r : {1, 2}) {
                CAPTURE(r);
                const int status = peers[static_cast<std::size_t>(r)]->wait(60s);
                const std::string log = peers[static_cast<std::size_t>(r)]->log();
                CAPTURE(log);
                CHECK(status == 0);
                CHECK(log.find("lost peers: 0, 3") != std::string::npos);
            }
            CHECK(job.average()["survivors"] == Json::array({1, 2}));
            peers[3]->kill(SIGKILL);
        }
    }

    TEST_CASE("a whole job stopped at once (SIGSTOP all, SIGCONT all) carries on with every peer") {
        // As a host that stalled: every bootstrap finds the gap in its own thread and judges
        // nobody by the silence over it, so no peer is declared lost.
        Job job(20, 0.01);
        auto peers = start_training(job, "async", 3);
        for (auto& p : peers) p->kill(SIGSTOP);
        std::this_thread::sleep_for(7s);  // past the 5 s heartbeat timeout
        for (auto& p : peers) p->kill(SIGCONT);
        for (int r = 0; r < 4; ++r) {
            CAPTURE(r);
            const int status = peers[static_cast<std::size_t>(r)]->wait(40s);
            const std::string log = peers[static_cast<std::size_t>(r)]->log();
            CAPTURE(log);
            CHECK(status == 0);
            CHECK(log.find("lost peers: none") != std::string::npos);
        }
        CHECK(job.average()["survivors"] == Json::array({0, 1, 2, 3}));
    }

    TEST_CASE("the cluster file's failure time ends a peer with status 3 and gossip goes on") {
        Job job(20, 0.01, R"("peers": [{"rank": 3, "fail_at": 0.6}],)");
        std::vector<std::unique_ptr<Process>> peers;
        for (int r = 0; r < 4; ++r)
            peers.push_back(job.start(r, "dpsgd", kToken, {"--checkpoint-every", "50"}));
        for (int r = 0; r < 4; ++r) {
            CAPTURE(r);
            const int status = peers[r]->wait(40s);
            const std::string log = peers[r]->log();
            CAPTURE(log);
            CHECK(status == (r == 3 ? 3 : 0));
        }
        CHECK(peers[3]->log().find("emulated failure") != std::string::npos);
        CHECK(job.average()["survivors"] == Json::array({0, 1, 2}));
        // Checkpoints of a survivor: its model after 50, 100, 150 steps, in the model file format.
        for (int s : {50, 100, 150}) {
            const auto f =
                gossamer::load_model_file(job.out + fmt::format("/checkpoint-1-{}.bin", s));
            CHECK(f.step == s);
            CHECK(f.params.size() == 11 * 2);  // softmax, 10 features + bias, 2 classes
        }
        CHECK_FALSE(std::filesystem::exists(job.out + "/checkpoint-1-200.bin"));
        const auto avg = gossamer::load_model_file(job.out + "/model.bin");
        CHECK(avg.step == 200);
    }

    TEST_CASE("bad input is one line and exit status 2 before anything is written") {
        Job job;
        auto cmd = [&](const std::string& extra) {
            return run(kBin + " peer --config " + job.config + " --out " + job.out + " " + extra);
        };
        struct Case {
            std::string args, says;
        };
        for (const auto& c :
             {Case{"--topology " + job.dir.path().string() + "/missing.json --rank 0", "missing"},
              Case{"--topology " + job.topology + " --rank 9", "out of range"},
              Case{"--topology " + job.topology + " --rank 1 --algorithm gosip", "gosip"},
              Case{"--topology " + job.topology, "no rank given"},
              // A token flag would show in ps: refused, pointing at the file or the variable.
              Case{"--topology " + job.topology + " --rank 0 --token " + kToken, "--token-file"},
              Case{"--topology " + job.topology + " --rank 0 --token=" + kToken, "ps"},
              Case{"--topology " + job.topology + " --rank 0 --token-file " +
                       job.dir.path().string() + "/no-token",
                   "cannot read the job token file"}}) {
            CAPTURE(c.args);
            auto r = cmd(c.args);
            CHECK(r.status == 2);
            CHECK(lines_of(r.err) == 1);
            CHECK_MESSAGE(r.err.find(c.says) != std::string::npos, r.err);
            CHECK(r.err.find(kToken) == std::string::npos);
            CHECK_FALSE(std::filesystem::exists(job.out));
        }
    }

    TEST_CASE("a bad GOSSAMER_UCX_LARGE is one line and exit status 2") {
        Job job;
        auto r = run("GOSSAMER_UCX_LARGE=fast GOSSAMER_JOB_TOKEN=" + std::string(kToken) + " " +
                     kBin + " peer --config " + job.config + " --out " + job.out + " --topology " +
                     job.topology + " --rank 0");
        CHECK(r.status == 2);
        CHECK(lines_of(r.err) == 1);
        CHECK_MESSAGE(r.err.find("GOSSAMER_UCX_LARGE: \"fast\" is not a way to send large "
                                 "messages") != std::string::npos,
                      r.err);
        CHECK_MESSAGE(r.err.find("automatic, rendezvous or eager") != std::string::npos, r.err);
    }

    TEST_CASE("a peer whose output cannot be written is refused before the start-up barrier") {
        Job job;
        const auto file = job.dir.write("a_file", "mine");
        std::filesystem::create_directories(job.dir.path() / "mine");
        job.dir.write("mine/notes.txt", "keep me");
        std::filesystem::create_directories(job.dir.path() / "dirs/model.bin");
        job.dir.write("dirs/.gossamer-output", "{}");
        struct Case {
            std::string out, says;
        };
        for (const auto& c :
             {Case{file + "/sub", "is a file, not a folder"},
              Case{"/proc/gossamer-test/out", "cannot create the output folder"},
              Case{(job.dir.path() / "mine").string(), "holds no .gossamer-output marker"},
              Case{(job.dir.path() / "dirs").string(), "model.bin is a folder"}}) {
            CAPTURE(c.out);
            const auto t0 = std::chrono::steady_clock::now();
            // Alone, rank 0 would wait 20 s at the barrier for the others if it got that far.
            auto r = run("GOSSAMER_JOB_TOKEN=t " + kBin + " peer --topology " + job.topology +
                         " --config " + job.config + " --rank 0 --join-timeout 20 --out " + c.out);
            CAPTURE(r.err);
            CHECK(r.status == 2);
            CHECK(lines_of(r.err) == 1);
            CHECK(r.err.rfind("error: --out: ", 0) == 0);
            CHECK(r.err.find(c.says) != std::string::npos);
            CHECK(std::chrono::steady_clock::now() - t0 < 10s);
        }
        CHECK(std::filesystem::exists(job.dir.path() / "mine/notes.txt"));
    }
}
