// Real `gossamer peer` processes in the lab, one per namespace, and faults of the network
// between them: the final loss against `gossamer sim`, and one edge cut mid-run by a blackhole
// route inside one peer's namespace (docs/operations/lab.md, "Fault tests"). The cut is on the edge
// between rank 1 and rank 0: the bootstrap's heartbeats run between rank 0 and every other peer (a
// star), so only an edge to rank 0 is one the heartbeats can judge.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "integration/processes.hpp"
#include "lab_support.hpp"
#include "support/run.hpp"
#include "support/sim_loss.hpp"
#include "support/temp_dir.hpp"

namespace lab = gossamer::lab;
using namespace gossamer::test;
using namespace std::chrono_literals;
using Json = nlohmann::json;

namespace {

const std::string kGossamer = GOSSAMER_BINARY;

// 4 peers in a lab: uncapped (the qdiscs only count), but the edge 0 <-> 1 has a link class
// each way (1 Gbit/s), so that its bytes are counted apart from the peers' other traffic.
lab::Lab make_lab() {
    lab::LabSpec s;
    s.peers.assign(4, {0, 0});
    s.links = {{0, 1, 1e9}, {1, 0, 1e9}};
    return lab::Lab::create(s);
}

// A job of 4 `gossamer peer` processes on a ring in the lab's namespaces, each at its lab
// address with UCX on its veth (UCX_TLS=tcp,self), steps padded to `base_time`.
struct LabJob {
    lab::Lab lab = make_lab();
    TempDir dir;
    std::string topology, config, cluster, out;
    // `algorithms`: the config's "algorithms" object (algorithm options), or empty.
    LabJob(const std::string& model, int epochs, double base_time,
           const std::string& algorithms = "") {
        std::string peers;
        for (const auto& h : lab.hosts())
            peers += (peers.empty() ? "" : ", ") + std::string("{\"host\": \"") + h.address +
                     "\", \"port\": 29700}";
        topology = dir.write("ring4.json",
                             "{\"peers\": [" + peers + "], \"graph\": {\"family\": \"ring\"}}");
        // 800 samples: 10 steps of 20 per epoch and peer.
        config = dir.write("train.json",
                           R"({"seed": 3,
            "data": {"name": "logreg_synthetic", "samples": 800, "test_samples": 200, "features": 10, "seed": 5},
            "model": )" + model +
                               R"(, "optimizer": {"name": "sgd", "lr": 0.2},
            "training": {"epochs": )" +
                               std::to_string(epochs) + R"(, "batch_size": 20})" +
                               (algorithms.empty() ? "" : ", \"algorithms\": " + algorithms) + "}");
        cluster = dir.write("cluster.json",
                            "{\"defaults\": {\"base_time\": " + std::to_string(base_time) +
                                "}, \"network\": {\"latency\": 1e-5, "
                                "\"bandwidth\": 1e9}}");
        out = (dir.path() / "out").string();
    }
    std::unique_ptr<Process> start(int rank, const std::string& algo) const {
        const auto& h = lab.hosts()[static_cast<std::size_t>(rank)];
        // The token in the environment, like every launcher passes it (never in argv).
        const std::string cmd = "exec ip netns exec " + h.netns +
                                " env GOSSAMER_JOB_TOKEN=lab-faults UCX_TLS=tcp,self "
                                "UCX_NET_DEVICES=" +
                                h.device + " " + kGossamer + " peer --topology " + topology +
                                " --config " + config + " --cluster " + cluster + " --rank " +
                                std::to_string(rank) + " --algorithm " + algo + " --out " + out;
        return std::make_unique<Process>(std::vector<std::string>{"/bin/sh", "-c", cmd},
                                         (dir.path() / ("log" + std::to_string(rank))).string());
    }
    std::vector<std::unique_ptr<Process>> start_all(const std::string& algo) const {
        std::vector<std::unique_ptr<Process>> peers;
        for (int r = 0; r < 4; ++r) peers.push_back(start(r, algo));
        return peers;
    }
    std::string metrics(int rank) const { return out + "/peer" + std::to_string(rank) + ".jsonl"; }
    Json average() const {
        std::ifstream in(out + "/average.json");
        return Json::parse(in, nullptr, false);
    }
    // A blackhole route in rank `in`'s namespace for rank `to`'s address: what `in` sends to
    // `to` is dropped (TCP in both directions stalls: no data one way, no ACKs the other).
    void cut(int in, int to, bool on) const {
        const auto r =
            lab::run_command({"ip", "-n", lab.hosts()[static_cast<std::size_t>(in)].netns, "route",
                              on ? "add" : "del", "blackhole",
                              lab.hosts()[static_cast<std::size_t>(to)].address + "/32"});
        REQUIRE_MESSAGE(r.status == 0, r.err);
    }
    // Bytes the link class from `from` to `to` carried so far (tc -s class on from's veth).
    std::uint64_t edge_bytes(int from, int to) const {
        const auto& h = lab.hosts()[static_cast<std::size_t>(from)];
        const auto r = lab::run_command(
            {"ip", "netns", "exec", h.netns, "tc", "-s", "class", "show", "dev", h.device});
        char id[16];
        std::snprintf(id, sizeof id, "1:%x ", 0x100 + to);
        const auto at = r.out.find(std::string("class htb ") + id);
        REQUIRE_MESSAGE(at != std::string::npos, r.out);
        std::smatch m;
        const std::string rest = r.out.substr(at);
        REQUIRE(std::regex_search(rest, m, std::regex(R"(Sent (\d+) bytes)")));
        return std::stoull(m[1].str());
    }
};

// Waits (at most 30 s) until rank `r` has written `lines` metric lines: it is training.
void wait_training(const LabJob& job, const std::vector<std::unique_ptr<Process>>& peers, int r,
                   int lines) {
    REQUIRE_MESSAGE(eventually([&] { return count_lines(job.metrics(r)) >= lines; }, 30),
                    "rank " << r << "'s log:\n"
                            << peers[static_cast<std::size_t>(r)]->log());
}

}  // namespace

TEST_SUITE("lab") {
    TEST_CASE("faults: 4 peers in 4 namespaces train dpsgd to the final loss of gossamer sim") {
        if (!have_netns()) return;
        LabJob job(R"({"name": "softmax"})", 3, 0.005);
        auto peers = job.start_all("dpsgd");
        for (int r = 0; r < 4; ++r) {
            CAPTURE(peers[static_cast<std::size_t>(r)]->log());
            CHECK(peers[static_cast<std::size_t>(r)]->wait(60s) == 0);
        }
        const Json avg = job.average();
        REQUIRE(avg.is_object());
        CHECK(avg["survivors"] == Json::array({0, 1, 2, 3}));
        const auto sim_out = (job.dir.path() / "sim").string();
        const auto s =
            run(kGossamer + " sim --topology " + job.topology + " --config " + job.config +
                " --cluster " + job.cluster + " --algorithms dpsgd --out " + sim_out);
        REQUIRE_MESSAGE(s.status == 0, s.err);
        const double sim_loss = sim_final_loss(sim_out, "dpsgd");
        REQUIRE(sim_loss > 0);
        const double loss = avg["loss"].get<double>();
        MESSAGE("final loss: peers in the lab " << loss << ", gossamer sim " << sim_loss);
        CHECK(std::abs(loss - sim_loss) <= 0.01 * sim_loss);
    }

    TEST_CASE("faults: an edge cut for 2 s under async carries shares again and nobody is lost") {
        if (!have_netns()) return;
        // 600 steps of 20 ms: about 12 s of training; the cut starts after 100 steps of rank 1.
        LabJob job(R"({"name": "mlp", "hidden": [32]})", 60, 0.02);
        auto peers = job.start_all("async");
        wait_training(job, peers, 1, 100);
        job.cut(1, 0, true);
        std::this_thread::sleep_for(2s);
        job.cut(1, 0, false);
        const auto up = job.edge_bytes(1, 0), down = job.edge_bytes(0, 1);
        std::this_thread::sleep_for(2s);
        const auto up2 = job.edge_bytes(1, 0), down2 = job.edge_bytes(0, 1);
        MESSAGE("edge 1 -> 0 carried " << up2 - up << " bytes, 0 -> 1 " << down2 - down
                                       << " in the 2 s after the cut");
        // A share of this model is about 1.6 kB; 20 ms steps push one every other step or so.
        CHECK(up2 - up > 20'000u);
        CHECK(down2 - down > 20'000u);
        for (int r = 0; r < 4; ++r) {
            const auto& p = *peers[static_cast<std::size_t>(r)];
            CHECK(peers[static_cast<std::size_t>(r)]->wait(60s) == 0);
            const auto log = p.log();
            CAPTURE(log);
            CHECK(log.find("lost peers: none") != std::string::npos);
            CHECK(log.find("vanished") == std::string::npos);
        }
        const Json avg = job.average();
        REQUIRE(avg.is_object());
        CHECK(avg["survivors"] == Json::array({0, 1, 2, 3}));
    }

    TEST_CASE(
        "faults: an edge cut for 15 s under async: the cut-off peer is declared lost and exits 4 "
        "without a result") {
        if (!have_netns()) return;
        LabJob job(R"({"name": "mlp", "hidden": [32]})", 60, 0.02);
        auto peers = job.start_all("async");
        wait_training(job, peers, 1, 100);
        job.cut(1, 0, true);
        const auto cut_at = std::chrono::steady_clock::now();
        // Rank 0 declares rank 1 lost after the 5 s heartbeat timeout, well inside the cut.
        CHECK(eventually(
            [&] {
                return peers[0]->log().find("rank 1 (" + job.lab.hosts()[1].address +
                                            ":29700) vanished: no heartbeat for 5 s") !=
                       std::string::npos;
            },
            10));
        std::this_thread::sleep_until(cut_at + 15s);
        job.cut(1, 0, false);
        for (int r : {0, 2, 3}) {
            const auto& p = *peers[static_cast<std::size_t>(r)];
            CHECK(peers[static_cast<std::size_t>(r)]->wait(60s) == 0);
            const auto log = p.log();
            CAPTURE(log);
            CHECK(log.find("lost peers: 1 (rank 1") != std::string::npos);
        }
        // Rank 1 lost rank 0 and then its ring neighbour 2 (which failed it): it reaches 2 of the
        // 4 peers of view 0, no majority, and writes nothing (peer.md, membership).
        CHECK(peers[1]->wait(60s) == 4);
        const auto log1 = peers[1]->log();
        CAPTURE(log1);
        CHECK(log1.find("[rank 1] not writing a result") != std::string::npos);
        const Json avg = job.average();
        REQUIRE(avg.is_object());
        CHECK(avg["survivors"] == Json::array({0, 2, 3}));
    }

    TEST_CASE(
        "faults: an edge cut for 15 s between two peers other than rank 0 under async: the send "
        "timeout is reported, rank 0 declares one end lost, and the job writes one result") {
        // Heartbeats cannot see this cut (both ends still reach rank 0); before failures seen
        // only by a transport were reported, the two ends failed each other, the survivor sets
        // differed and the exact average never completed (docs/modules/bootstrap.md, "Transport
        // failures").
        if (!have_netns()) return;
        // Silent neighbours off: async keeps pushing into the cut edge until its sends pend
        // past the send timeout (with the rule on it stops, and the cut costs nobody: below).
        LabJob job(R"({"name": "mlp", "hidden": [32]})", 60, 0.02, R"({"async": {"silence": 0}})");
        auto peers = job.start_all("async");
        wait_training(job, peers, 1, 100);
        job.cut(1, 2, true);
        const auto cut_at = std::chrono::steady_clock::now();
        // The send timeout (10 s for this model), one heartbeat interval of grace, the decision.
        std::smatch m;
        const std::regex declared(R"(rank ([12]) \([0-9.]+:29700\) declared lost: rank ([12]) )"
                                  R"(\([0-9.]+:29700\)'s transport failed it)");
        std::string log0;
        CHECK(eventually(
            [&] {
                log0 = peers[0]->log();
                return std::regex_search(log0, m, declared);
            },
            25));
        std::this_thread::sleep_until(cut_at + 15s);
        job.cut(1, 2, false);
        REQUIRE_MESSAGE(std::regex_search(log0, m, declared), log0);
        const int lost = std::stoi(m[1].str()), reporter = std::stoi(m[2].str());
        MESSAGE("rank " << reporter << " reported rank " << lost << "; rank 0 declared it lost");
        CHECK(lost != reporter);
        std::vector<int> survivors;
        for (int r = 0; r < 4; ++r) {
            if (r == lost) continue;
            survivors.push_back(r);
            const auto& p = *peers[static_cast<std::size_t>(r)];
            CHECK(peers[static_cast<std::size_t>(r)]->wait(60s) == 0);
            CAPTURE(p.log());
            // "lost peers: R (rank R (address) declared lost: ...)": the list, then the cause.
            const auto r_lost = std::to_string(lost);
            CHECK(p.log().find("lost peers: " + r_lost + " (rank " + r_lost + " (") !=
                  std::string::npos);
        }
        // The expelled end writes nothing and says why (peer.md, membership).
        CHECK(peers[static_cast<std::size_t>(lost)]->wait(60s) == 4);
        const Json avg = job.average();
        REQUIRE(avg.is_object());
        CHECK(avg["survivors"] == Json(survivors));
    }

    TEST_CASE(
        "faults: an edge cut for 15 s between two peers other than rank 0 under async, silent "
        "neighbours skipped: nobody is lost and all four finish") {
        // The ends of the cut stop pushing to each other once the other is silent (a few steps),
        // so no send pends past its timeout and no mass goes into the cut
        // (docs/algorithms/async.md, "Silent neighbours"); after the cut the edge carries shares
        // again.
        if (!have_netns()) return;
        LabJob job(R"({"name": "mlp", "hidden": [32]})", 60, 0.02);
        auto peers = job.start_all("async");
        wait_training(job, peers, 1, 100);
        job.cut(1, 2, true);
        std::this_thread::sleep_for(15s);
        job.cut(1, 2, false);
        for (int r = 0; r < 4; ++r) {
            const auto& p = *peers[static_cast<std::size_t>(r)];
            CHECK(peers[static_cast<std::size_t>(r)]->wait(60s) == 0);
            CAPTURE(p.log());
            CHECK(p.log().find("lost peers: none") != std::string::npos);
        }
        const Json avg = job.average();
        REQUIRE(avg.is_object());
        CHECK(avg["survivors"] == Json::array({0, 1, 2, 3}));
        MESSAGE("total mass after the cut: " << avg["total_mass"]);
        CHECK(avg["total_mass"].get<double>() == doctest::Approx(4.0).epsilon(1e-6));
    }

    TEST_CASE(
        "faults: an edge cut under allreduce stops the job within the heartbeat timeout "
        "naming the unreachable rank") {
        if (!have_netns()) return;
        LabJob job(R"({"name": "mlp", "hidden": [32]})", 60, 0.02);
        auto peers = job.start_all("allreduce");
        wait_training(job, peers, 1, 50);
        job.cut(1, 0, true);
        const auto cut_at = std::chrono::steady_clock::now();
        // The 5 s heartbeat timeout, then every peer stops (0.5 s forwarding included).
        for (int r = 0; r < 4; ++r) {
            CAPTURE(peers[static_cast<std::size_t>(r)]->log());
            CHECK(peers[static_cast<std::size_t>(r)]->wait(20s) == 1);
        }
        const double took =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - cut_at).count();
        MESSAGE("all-reduce stopped " << took << " s after the cut");
        CHECK(took < 12);
        for (int r : {0, 2, 3}) {
            const auto log = peers[static_cast<std::size_t>(r)]->log();
            CAPTURE(log);
            CHECK(log.find("stopped: peer 1 failed") != std::string::npos);
        }
        CHECK_FALSE(std::filesystem::exists(job.out + "/average.json"));
    }
}
