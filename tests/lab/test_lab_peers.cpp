// Real peers in the lab: `gossamer peer` processes started in their namespaces (ip netns exec,
// UCX_TLS=tcp,self, UCX_NET_DEVICES=<veth>, each at its lab address) move their bytes through
// the shaped veths: the qdiscs' own counters see at least 95% of what the peers report sent.
#include <doctest/doctest.h>
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "gossamer/lab/shaping.hpp"
#include "lab_support.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

namespace lab = gossamer::lab;
using namespace gossamer::test;

namespace {

const std::string kGossamer = GOSSAMER_BINARY;

// bytes_sent of the summary line of OUT/peer<r>.jsonl (0 when missing).
std::uint64_t reported_sent(const std::filesystem::path& file) {
    std::ifstream in(file);
    std::string line;
    std::uint64_t sent = 0;
    while (std::getline(in, line)) {
        const auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_object() && j.value("summary", false)) sent = j.value("bytes_sent", 0ull);
    }
    return sent;
}

std::uint64_t uplink_total(const lab::Lab& l) {
    std::uint64_t sum = 0;
    for (int i = 0; i < static_cast<int>(l.hosts().size()); ++i)
        sum += lab::uplink_counters(l.slot(), i).bytes;
    return sum;
}

}  // namespace

TEST_SUITE("lab") {
    TEST_CASE(
        "peers: gossamer peer processes in the lab send through the qdiscs (>= 95% of the "
        "bytes they report)") {
        if (!have_netns()) return;
        const int n = 4;
        lab::LabSpec s;
        s.peers.assign(n, {200e6, 200e6});
        auto l = lab::Lab::create(s);
        TempDir dir;
        std::string peers;
        for (const auto& h : l.hosts())
            peers += (peers.empty() ? "" : ", ") + std::string("{\"host\": \"") + h.address +
                     "\", \"port\": 29700}";
        const auto topo =
            dir.write("topo.json", "{\"version\": 1, \"peers\": [" + peers +
                                       "], \"graph\": {\"family\": \"ring\"}, \"weights\": "
                                       "\"metropolis_hastings\"}");
        // A 23,554-parameter MLP: about 1 MB per peer over the run, far above the bootstrap's
        // own few kB, so that a transport around the veth could not reach 95%.
        const auto config = dir.write(
            "config.json",
            R"({"seed": 1, "data": {"name": "logreg_synthetic", "samples": 2000, "test_samples": 200,
                "features": 20, "seed": 7}, "model": {"name": "mlp", "hidden": [1024]},
                "optimizer": {"name": "sgd", "lr": 0.1}, "training": {"epochs": 1, "batch_size": 100}})");
        const auto out = dir.path() / "out";
        const std::uint64_t before = uplink_total(l);
        std::string cmd;
        for (int r = 0; r < n; ++r) {
            const auto& h = l.hosts()[static_cast<std::size_t>(r)];
            cmd += "ip netns exec " + h.netns +
                   " env UCX_TLS=tcp,self UCX_NET_DEVICES=" + h.device +
                   " GOSSAMER_JOB_TOKEN=lab-test timeout 60 " + kGossamer + " peer --topology " +
                   topo + " --config " + config + " --algorithm dpsgd --rank " + std::to_string(r) +
                   " --out " + out.string() + " 2>>" + (dir.path() / "peers.log").string() + " & ";
        }
        const auto r = run(cmd + "wait");
        INFO("peers' stderr: " << std::ifstream(dir.path() / "peers.log").rdbuf());
        REQUIRE(r.status == 0);
        std::uint64_t reported = 0;
        for (int i = 0; i < n; ++i) {
            const auto sent = reported_sent(out / ("peer" + std::to_string(i) + ".jsonl"));
            CHECK(sent > 0);
            reported += sent;
        }
        const std::uint64_t counted = uplink_total(l) - before;
        MESSAGE("peers reported " << reported << " bytes sent; their uplink qdiscs counted "
                                  << counted);
        CHECK(reported > 2'000'000u);
        CHECK(static_cast<double>(counted) >= 0.95 * static_cast<double>(reported));
    }

    TEST_CASE(
        "peers: gossamer launch --hosts netns runs the peers as lab hosts, the kernel "
        "shapes their links and the lab is gone afterwards") {
        if (!have_netns()) return;
        TempDir dir;
        const auto config = dir.write(
            "config.json",
            R"({"seed": 1, "data": {"name": "logreg_synthetic", "samples": 2000, "test_samples": 200,
                "features": 20, "seed": 7}, "model": {"name": "mlp", "hidden": [1024]},
                "optimizer": {"name": "sgd", "lr": 0.1}, "training": {"epochs": 1, "batch_size": 100}})");
        // The link 0 <-> 1 at 4 Mbit/s: dpsgd's 5 rounds send 5 models of 94 kB each way over
        // it, at least 0.94 s on that link; unshaped the run takes about 0.25 s here.
        const auto cluster = dir.write("cluster.json", R"({"n": 4,
            "defaults": {"base_time": 0.001, "uplink": 1.25e8, "downlink": 1.25e8},
            "network": {"latency": 0.001, "bandwidth": 1.25e9,
                        "links": [{"between": [0, 1], "bandwidth": 5e5}]}})");
        const auto out = dir.path() / "out";
        const auto r =
            run(kGossamer + " launch --hosts netns --topology " + std::string(GOSSAMER_SOURCE_DIR) +
                "/examples/topologies/hosts4.json --config " + config + " --cluster " + cluster +
                " --algorithms dpsgd --no-plots --out " + out.string());
        INFO(r.out << r.err);
        REQUIRE(r.status == 0);
        const auto at = r.err.find("lab gsm");
        REQUIRE(at != std::string::npos);
        const auto slot = lab::parse_job(r.err.substr(at + 4, r.err.find(':', at) - at - 4));
        REQUIRE(slot);
        CHECK(r.err.find("the peers emulate the cluster file's latencies") != std::string::npos);
        // The peers bound their lab addresses; their own bandwidth pacing was off.
        std::ifstream topo(out / "dpsgd" / "topology.json");
        const auto t = nlohmann::json::parse(topo);
        CHECK(t["peers"][2]["host"] == lab::peer_address(*slot, 2));
        std::ifstream cl(out / "dpsgd" / "cluster.json");
        const auto c = nlohmann::json::parse(cl);
        CHECK(c["network"]["links"][0]["bandwidth"].get<double>() == 1e15);
        CHECK(c["network"]["latency"].get<double>() == 0.001);
        std::ifstream res(out / "result.json");
        const auto summary = nlohmann::json::parse(res);
        CHECK(summary["hosts"] == "netns");
        const double train = summary["algorithms"][0]["train_seconds"].get<double>();
        MESSAGE("dpsgd over a 4 Mbit/s link: " << train << " s");
        CHECK(train >= 0.7);
        CHECK(eventually([&] { return lab::job_netns(*slot).empty(); }, 10));
    }

    TEST_CASE(
        "peers: gossamer launch --hosts netns follows the cluster file's churn: a late join and "
        "a rejoin after a failure") {
        if (!have_netns()) return;
        TempDir dir;
        const auto config = dir.write(
            "config.json",
            R"({"seed": 3, "data": {"name": "logreg_synthetic", "samples": 800, "test_samples": 200,
                "features": 10, "seed": 5}, "model": {"name": "softmax"},
                "optimizer": {"name": "sgd", "lr": 0.2}, "training": {"epochs": 100, "batch_size": 20}})");
        // 1000 steps of 10 ms; rank 3 enters at 2 s, rank 2 fails at 3 s and is back at 4.5 s.
        const auto cluster = dir.write("churn.json", R"({"n": 4, "defaults": {"base_time": 0.01},
            "peers": [{"rank": 3, "join_at": 2.0}, {"rank": 2, "fail_at": 3.0, "rejoin_at": 4.5}],
            "network": {"latency": 1e-4, "bandwidth": 1.25e8}})");
        const auto out = dir.path() / "out";
        const auto r =
            run(kGossamer + " launch --hosts netns --topology " + std::string(GOSSAMER_SOURCE_DIR) +
                "/examples/topologies/hosts4.json --config " + config + " --cluster " + cluster +
                " --algorithms async --timeout 90 --no-plots --out " + out.string());
        INFO(r.out << r.err);
        REQUIRE(r.status == 0);
        const auto at = r.err.find("lab gsm");
        REQUIRE(at != std::string::npos);
        const auto slot = lab::parse_job(r.err.substr(at + 4, r.err.find(':', at) - at - 4));
        REQUIRE(slot);
        CHECK(r.err.find("async: peer 2 stopped at its failure time (cluster file); it rejoins") !=
              std::string::npos);
        std::ifstream res(out / "async" / "result.json");
        const auto row = nlohmann::json::parse(res);
        CHECK(row["ok"].get<bool>());
        CHECK(row["failed_peers"].get<int>() == 0);
        CHECK(row["survivors"] == nlohmann::json::array({0, 1, 2, 3}));
        for (const auto& p : row["peers"]) CHECK(p["exit"] == "exit status 0");
        CHECK(row["peers"][2]["joins"] == 1);
        CHECK(row["peers"][3]["joins"] == 1);
        const double mass = row["total_mass"].get<double>();
        MESSAGE("lab churn under async: total mass " << mass << " of 3 at the start");
        CHECK(mass < 3.0 - 1e-3);
        CHECK(mass > 0.5);
        CHECK(eventually([&] { return lab::job_netns(*slot).empty(); }, 10));
    }

    TEST_CASE("peers: gossamer launch --hosts refuses what the lab cannot run") {
        const std::string base =
            kGossamer + " launch --topology " + std::string(GOSSAMER_SOURCE_DIR) +
            "/examples/topologies/hosts4.json --config " + std::string(GOSSAMER_SOURCE_DIR) +
            "/examples/train/logreg_synthetic.json --no-plots ";
        auto refused = [&](const std::string& args, const std::string& part) {
            const auto r = run(base + args);
            INFO(args << " -> " << r.status << ": " << r.err);
            CHECK(r.status == 2);
            CHECK(r.err.find(part) != std::string::npos);
        };
        refused("--hosts moon", "--hosts: \"moon\" is not a kind of host");
        refused("--hosts netns --inproc", "not --inproc threads");
    }

    TEST_CASE("peers: SIGKILL of gossamer launch --hosts netns leaves no peer and no lab") {
        if (!have_netns()) return;
        TempDir dir;
        const auto config = dir.write(
            "config.json",
            R"({"seed": 1, "data": {"name": "logreg_synthetic", "samples": 2000, "test_samples": 200,
                "features": 20, "seed": 7}, "model": {"name": "mlp", "hidden": [1024]},
                "optimizer": {"name": "sgd", "lr": 0.1}, "training": {"epochs": 400, "batch_size": 100}})");
        const auto out = dir.path() / "out";
        Child launch({"/bin/sh", "-c",
                      "exec " + kGossamer + " launch --hosts netns --topology " +
                          std::string(GOSSAMER_SOURCE_DIR) +
                          "/examples/topologies/hosts4.json --config " + config +
                          " --algorithms dpsgd --no-plots --timeout 60 --out " + out.string() +
                          " 2>&1"});
        const auto line = launch.line_with("lab gsm", 30);
        REQUIRE(!line.empty());
        const auto at = line.find("lab gsm");
        const auto slot = lab::parse_job(line.substr(at + 4, line.find(':', at) - at - 4));
        REQUIRE(slot);
        REQUIRE(!launch.line_with("starting 4 peer processes", 30).empty());
        // the peers are up when their metrics files appear
        REQUIRE(
            eventually([&] { return std::filesystem::exists(out / "dpsgd" / "peer3.jsonl"); }, 30));
        ::kill(launch.pid(), SIGKILL);
        CHECK(launch.wait(10) == -1);
        CHECK(eventually([&] { return lab::job_netns(*slot).empty(); }, 15));
        // "[g]" keeps the pattern from matching the shell that runs pgrep
        const std::string pgrep =
            "pgrep -f '[g]ossamer peer --topology " + out.string() + "' >/dev/null";
        CHECK(eventually([&] { return std::system(pgrep.c_str()) != 0; }, 15));
    }
}
