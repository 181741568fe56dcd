// Measured edges in the lab (docs/protocols.md, "Measured edges"): two gossamer peer processes
// in their namespaces, peer 0's uplink shaped by the kernel to 100 Mbit/s; the throughput peer
// 0 measures from its own send completions on the edge to 1 is within 10% of the cap.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "lab_support.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

namespace lab = gossamer::lab;
using namespace gossamer::test;

namespace {

// The "edges" of the summary line of a peer's jsonl (null when missing).
nlohmann::json summary_edges(const std::filesystem::path& file) {
    std::ifstream in(file);
    std::string line;
    nlohmann::json edges;
    while (std::getline(in, line)) {
        const auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_object() && j.value("summary", false)) edges = j["edges"];
    }
    return edges;
}

}  // namespace

TEST_SUITE("lab") {
    TEST_CASE("links: a peer measures its 100 Mbit/s shaped edge within 10% from its own sends") {
        if (!have_netns()) return;
        lab::LabSpec s;
        s.peers = {{100e6, 0}, {0, 0}};
        auto l = lab::Lab::create(s);
        TempDir dir;
        std::string peers;
        for (const auto& h : l.hosts())
            peers += (peers.empty() ? "" : ", ") + std::string("{\"host\": \"") + h.address +
                     "\", \"port\": 29710}";
        const auto topo = dir.write("topo.json", "{\"version\": 1, \"peers\": [" + peers +
                                                     "], \"graph\": {\"family\": \"complete\"}, "
                                                     "\"weights\": \"uniform\"}");
        // An MLP of about 345k parameters: a share is 1.4 MB, 0.11 s at 100 Mbit/s, while a
        // step of 10 samples takes a few ms: the outbox keeps the edge busy, one share in
        // flight, so a completion means the link took the bytes (an idle edge's send completes
        // once the kernel's socket buffer, up to 4 MB, holds it: docs/protocols.md).
        const auto config = dir.write(
            "config.json",
            R"({"seed": 1, "data": {"name": "logreg_synthetic", "samples": 2000, "test_samples": 200,
                "features": 20, "seed": 7}, "model": {"name": "mlp", "hidden": [15000]},
                "optimizer": {"name": "sgd", "lr": 0.05}, "training": {"epochs": 2, "batch_size": 10},
                "algorithms": {"async": {"outbox": true}}})");
        // A delivered rate is only as good as the sender's progress: on a loaded machine (two
        // cores shared with builds) a run can be starved; up to three runs, each reported.
        bool within = false;
        for (int attempt = 0; attempt < 3 && !within; ++attempt) {
            const auto out = dir.path() / ("out" + std::to_string(attempt));
            std::string cmd;
            for (int r = 0; r < 2; ++r) {
                const auto& h = l.hosts()[static_cast<std::size_t>(r)];
                cmd += "ip netns exec " + h.netns +
                       " env UCX_TLS=tcp,self UCX_NET_DEVICES=" + h.device +
                       " OPENBLAS_NUM_THREADS=1 GOSSAMER_JOB_TOKEN=lab-links timeout 90 " +
                       std::string(GOSSAMER_BINARY) + " peer --topology " + topo + " --config " +
                       config + " --eval-interval 1000 --algorithm async --rank " +
                       std::to_string(r) + " --out " + out.string() + " 2>>" +
                       (dir.path() / "peers.log").string() + " & ";
            }
            const auto r = run(cmd + "wait");
            REQUIRE(r.status == 0);
            const auto edges = summary_edges(out / "peer0.jsonl");
            INFO("peer 0's edges: " << edges.dump());
            REQUIRE(edges.is_array());
            double measured = 0;
            std::int64_t samples = 0;
            for (const auto& e : edges)
                if (e.value("peer", -1) == 1 && e.contains("throughput")) {
                    measured = e["throughput"].get<double>();
                    samples = e["link_samples"].get<std::int64_t>();
                }
            MESSAGE("run " << attempt + 1 << ": peer 0 measured " << measured * 8 / 1e6
                           << " Mbit/s to peer 1 over " << samples
                           << " sends (uplink shaped to 100 Mbit/s)");
            CHECK(samples >= 10);
            within = measured * 8 >= 0.90 * 100e6 && measured * 8 <= 1.10 * 100e6;
        }
        CHECK(within);
    }
}
