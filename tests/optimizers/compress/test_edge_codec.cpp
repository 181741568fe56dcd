// Per-edge compression (edge_codec.hpp, docs/algorithms/compression.md "Per-edge compression"): the
// tier choice, its options, and choco with a codec per edge from measured throughput, in the
// simulator and with inproc peers on a paced slow link: raw floats on fast edges, the tier's
// compressor on slow ones, the codec in each header, replicas bit-identical at both ends.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "gossamer/core/cluster.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocol/edge_codec.hpp"
#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/optimizers/protocols/choco/choco.hpp"
#include "gossamer/peer/local.hpp"
#include "gossamer/sim/simulation.hpp"
#include "optimizers/harness/network.hpp"

using namespace gossamer;
using proto::Choco;
using proto::EdgeCodecs;

namespace {

std::vector<proto::EdgeCodecTier> tiers(const char* text) {
    json::Document doc = json::parse_text(text, "tiers.json");
    return proto::parse_edge_codec_tiers(json::Node(doc));
}

std::shared_ptr<const topology::Schedule> family(const char* name, int n) {
    topology::FamilySpec f;
    f.family = name;
    f.n = n;
    f.weights = topology::WeightRule::metropolis_hastings;
    return topology::generate(f);
}

}  // namespace

TEST_CASE("edge codecs: raw on fast edges, the tightest tier below, the channel's when unknown") {
    const EdgeCodecs c(tiers(R"([{"below": 1e6, "compressor": {"name": "topk", "fraction": 0.1}},
                                 {"below": 1e8, "compressor": {"name": "int8"}}])"));
    REQUIRE(c.on());
    CHECK(c.tiers()[0].below == 1e8);  // sorted by descending bound
    CHECK(c.choose(0) == proto::kCodecChannel);
    CHECK(c.choose(2e8) == proto::kCodecRaw);
    CHECK(c.choose(1e8) == proto::kCodecRaw);
    CHECK(c.choose(5e7) == 2);  // int8
    CHECK(c.choose(5e5) == 3);  // top-k
    const auto fp16 = optim::make_compressor({});
    CHECK(c.compressor(0, fp16.get()) == fp16.get());
    CHECK(c.compressor(1, fp16.get()) == nullptr);
    CHECK(c.compressor(2, nullptr)->kind() == optim::CompressorKind::int8);
    CHECK(c.compressor(3, nullptr)->kind() == optim::CompressorKind::topk);
    CHECK_THROWS_AS(c.compressor(4, nullptr), Error);
    CHECK_THROWS_AS(EdgeCodecs{}.compressor(1, nullptr), Error);  // no tiers: only codec 0
    CHECK(EdgeCodecs::words(nullptr, 10) == 10);
}

TEST_CASE("edge codecs: an encoded delta decodes to the same floats at both ends") {
    const EdgeCodecs c(tiers(R"([{"below": 1e8, "compressor": {"name": "int8", "block": 8}}])"));
    const std::vector<float> delta = {0.5f, -1.25f, 3.0f, 0.0f, 7.5f, -2.0f, 1e-3f, 4.0f, 9.0f};
    for (const std::uint8_t codec : {proto::kCodecRaw, std::uint8_t{2}}) {
        CAPTURE(int(codec));
        const optim::Compressor* q = c.compressor(codec, nullptr);
        std::vector<float> payload(EdgeCodecs::words(q, delta.size()));
        std::vector<float> sender(delta.size(), 1.0f), receiver(delta.size(), 1.0f);
        const optim::CodecKey key{0, 7, 3};
        proto::encode_delta(q, delta, key, payload, sender);
        proto::decode_delta(q, payload, key, receiver);
        CHECK(sender == receiver);  // bit-identical
        if (!q) CHECK(sender[4] == 8.5f);
    }
}

TEST_CASE("edge codecs: the device path encodes the host path's bytes, raw and compressed") {
    const EdgeCodecs c(tiers(R"([{"below": 1e8, "compressor": {"name": "int8", "block": 4}}])"));
    const auto dev = proto::emulated_device();
    const std::vector<float> delta = {0.5f, -1.25f, 3.0f, 0.0f, 7.5f, -2.0f, 1e-3f, 4.0f};
    const std::size_t n = delta.size();
    for (const std::uint8_t codec : {proto::kCodecRaw, std::uint8_t{2}}) {
        CAPTURE(int(codec));
        const optim::Compressor* q = c.compressor(codec, nullptr);
        const optim::CodecKey key{0, 9, 1};
        std::vector<float> host_payload(EdgeCodecs::words(q, n)), host_xhat(n, 2.0f);
        proto::encode_delta(q, delta, key, host_payload, host_xhat);
        proto::DeviceVector d_delta(*dev, n), d_xhat(*dev, n), d_recv(*dev, n);
        dev->upload(d_delta.data(), delta);
        const std::vector<float> twos(n, 2.0f);
        dev->upload(d_xhat.data(), twos);
        dev->upload(d_recv.data(), twos);
        std::vector<float> dev_payload(host_payload.size());
        proto::encode_delta(q, d_delta.span(), key, dev_payload, d_xhat.span(), dev.get());
        proto::decode_delta(q, dev_payload, key, d_recv.span(), dev.get());
        std::vector<float> sender(n), receiver(n);
        dev->download(sender, d_xhat.data());
        dev->download(receiver, d_recv.data());
        CHECK(dev_payload == host_payload);
        CHECK(sender == host_xhat);
        CHECK(receiver == host_xhat);
    }
}

TEST_CASE("edge codecs: bad tiers and shared replicas are ConfigErrors naming the path") {
    for (const char* bad :
         {R"({"edge_compression": []})", R"({"edge_compression": [{"below": 0,
            "compressor": {"name": "int8"}}]})",
          R"({"edge_compression": [{"below": 1e6}]})",
          R"({"edge_compression": [{"below": 1e6, "compressor": {"name": "zip"}}]})",
          R"({"edge_compression": [{"below": 1e6, "compressor": {"name": "int8"}},
                                   {"below": 1e6, "compressor": {"name": "fp16"}}]})",
          R"({"edge_compression": [{"below": 1e6, "compressor": {"name": "int8"}, "x": 1}]})",
          R"({"replicas": "shared", "edge_compression": [{"below": 1e6,
            "compressor": {"name": "int8"}}]})"}) {
        CAPTURE(bad);
        json::Document doc = json::parse_text(bad, "choco.json");
        json::Node node(doc);
        try {
            proto::parse_choco_options(&node);
            FAIL("no error");
        } catch (const ConfigError& e) {
            CHECK(e.path().rfind("edge_compression", 0) == 0);
        }
    }
}

TEST_CASE("per-edge compression in the simulator: int8 on the slow edges only, and it trains") {
    const auto cfg = optim::parse_training_config(json::parse_text(R"({"seed": 3,
        "data": {"name": "logreg_synthetic", "samples": 1600, "test_samples": 400, "features": 20, "seed": 5},
        "model": {"name": "mlp", "hidden": [1024]}, "optimizer": {"name": "sgd", "lr": 0.1},
        "training": {"epochs": 3, "batch_size": 20}})",
                                                                   "cfg.json"));
    const auto data = optim::load_training_data(cfg);
    // 1 Gbit/s everywhere but rank 2's links, 1 MB/s.
    auto cluster = homogeneous_cluster(8, 0.02, 1e-4, 1.25e8);
    cluster.peers[2].uplink = cluster.peers[2].downlink = 1e6;
    const auto run = [&](const char* options) {
        sim::SimSetup s;
        s.algorithm = "choco";
        s.options = json::Node(json::parse_text(options, "choco.json"));
        s.topology = family("ring", 8);
        s.cluster = &cluster;
        s.config = &cfg;
        s.train = &data.train;
        s.test = &data.test;
        s.epochs = cfg.epochs;
        s.eval_interval = 1.0;
        return sim::simulate(s);
    };
    // Uncompressed: a tier no measured edge is below sends raw floats everywhere.
    const auto plain = run(R"({"gamma": 0.5, "edge_compression": [{"below": 1,
        "compressor": {"name": "int8"}}]})");
    const auto tiered = run(R"({"gamma": 0.5, "edge_compression": [{"below": 1e7,
        "compressor": {"name": "int8"}}]})");
    // Bytes over the slow edges (to and from rank 2) and the codecs used on each edge.
    const auto slow_bytes = [](const sim::SimResult& r) {
        std::uint64_t sum = 0;
        for (const auto& p : r.peers)
            for (const auto& e : p.edges)
                if ((p.rank == 2 || e["peer"] == 2) && e.contains("link_bytes"))
                    sum += e["link_bytes"].get<std::uint64_t>();
        return sum;
    };
    for (const auto& p : tiered.peers) {
        REQUIRE(p.edges.is_array());
        for (const auto& e : p.edges) {
            CAPTURE(p.rank);
            CAPTURE(e.dump());
            const bool slow = p.rank == 2 || e["peer"] == 2;
            const auto& codecs = e["codecs"];
            CHECK(codecs.value(slow ? "0:int8" : "raw", 0) > 10);
            CHECK(codecs.value(slow ? "raw" : "0:int8", 0) == 0);
        }
    }
    MESSAGE("bytes over the slow edges: " << slow_bytes(plain) << " (raw on every edge), "
                                          << slow_bytes(tiered) << " (int8 on them)");
    CHECK(slow_bytes(tiered) < 0.4 * slow_bytes(plain));
    CAPTURE(tiered.evals.back().accuracy);
    CAPTURE(plain.evals.back().accuracy);
    CAPTURE(tiered.evals.front().accuracy);
    CHECK(tiered.evals.back().accuracy > tiered.evals.front().accuracy + 0.1);
    CHECK(tiered.evals.back().accuracy > plain.evals.back().accuracy - 0.02);
}

TEST_CASE("per-edge compression with inproc peers: a paced slow link gets top-k, replicas match") {
    const int n = 4;
    const std::size_t d = 32768;  // 128 kB: a full model and a raw delta time throughput
    const json::Node options(json::parse_text(
        R"({"gamma": 0.4, "edge_compression": [{"below": 2e6, "compressor": {"name": "topk", "fraction": 0.1}}]})",
        "choco.json"));
    auto net = gossamer::testing::make_network(
        family("ring", n), 40, proto::make_choco, &options, [](int r) {
            return std::make_unique<gossamer::testing::QuadraticWorker>(
                gossamer::testing::random_vector(d, 500 + static_cast<std::uint64_t>(r)), 0.0);
        });
    const auto out = peer::run_inproc_peers(net.protocols(), net.locals(), [](int r) {
        peer::DriverOptions o;
        o.run_timeout = peer::Millis(60'000);
        o.declared_step_time = [](std::int64_t, double) { return 0.002; };
        // Rank 0's link to 1 carries 1 MB/s (a raw delta: 0.13 s); the others 1 GB/s.
        if (r == 0) o.link = [](int to) { return peer::LinkPacing{0, to == 1 ? 1e6 : 1e9}; };
        return o;
    });
    for (const auto& o : out) REQUIRE(o.error == "");
    const auto& p0 = net.at<Choco>(0);
    const auto to1 = p0.codecs_sent(1), to3 = p0.codecs_sent(3);
    CAPTURE(p0.edge_report().dump());
    REQUIRE(to1.size() >= 3);
    CHECK(to1[2] > 20);                 // top-k on the slow edge once it was measured
    CHECK(to1[proto::kCodecRaw] == 0);  // never raw there
    REQUIRE(to3.size() >= 2);
    CHECK(to3[proto::kCodecRaw] > 20);  // raw on the fast one
    CHECK(p0.edge_speeds().throughput(1) == doctest::Approx(1e6).epsilon(0.3));
    // Replicas bit-identical at both ends of every edge, whatever codec each delta used.
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) {
            const auto a = net.at<Choco>(i).public_replica(j);
            if (a.empty()) continue;
            const auto b = net.at<Choco>(j).neighbour_replica(i);
            CAPTURE(i);
            CAPTURE(j);
            CHECK(std::equal(a.begin(), a.end(), b.begin(), b.end()));
        }
}
