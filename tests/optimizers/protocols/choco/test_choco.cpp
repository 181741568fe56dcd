#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocol/registry.hpp"
#include "gossamer/optimizers/protocols/choco/choco.hpp"
#include "gossamer/topology/schedule.hpp"
#include "gossamer/topology/topology_file.hpp"
#include "optimizers/harness/network.hpp"

using namespace gossamer::testing;
using gossamer::proto::Choco;
using gossamer::proto::CostOnlyWorker;
using gossamer::proto::make_choco;
using gossamer::proto::MessageKind;
using gossamer::transport::kHeaderBytes;
namespace topo = gossamer::topology;
namespace json = gossamer::json;

namespace {

std::shared_ptr<const topo::Schedule> family(const std::string& name, int n,
                                             topo::WeightRule rule = topo::WeightRule::uniform) {
    topo::FamilySpec spec;
    spec.family = name;
    spec.n = n;
    spec.weights = rule;
    return topo::generate(spec);
}

// n choco peers with zero-gradient workers starting at random points of dimension d.
Network consensus(std::shared_ptr<const topo::Schedule> s, std::int64_t steps,
                  const std::string& options, std::size_t d = 50) {
    json::Document doc = json::parse_text(options, "choco.json");
    json::Node node(doc);
    return make_network(s, steps, make_choco, &node, [d](int i) {
        return std::make_unique<QuadraticWorker>(random_vector(d, 100 + static_cast<unsigned>(i)));
    });
}

HarnessOptions jittery(bool fifo = true) {
    HarnessOptions o = seconds_clock();
    o.step_jitter = 0.7;
    o.delay_jitter = 1.5;
    o.fifo_channels = fifo;
    return o;
}

void check_replicas_match(const Network& net) {
    std::size_t edges = 0;
    for (int i = 0; i < net.n(); ++i)
        for (int j = 0; j < net.n(); ++j) {
            const auto a = net.at<Choco>(i).public_replica(j);
            if (a.empty()) continue;
            ++edges;
            CAPTURE(i);
            CAPTURE(j);
            CHECK(net.at<Choco>(j).applied_from(i) == net.at<Choco>(i).sent_on(j));
            const auto b = net.at<Choco>(j).neighbour_replica(i);
            CHECK(std::equal(a.begin(), a.end(), b.begin(), b.end()));  // bit-identical
        }
    CHECK(edges > 0);
}

const char* const kCompressors[] = {R"({"name": "fp16"})", R"({"name": "int8", "block": 16})",
                                    R"({"name": "topk", "fraction": 0.1})",
                                    R"({"name": "randomk", "fraction": 0.1})"};

}  // namespace

TEST_CASE("choco replicas are bit-identical at both ends of every edge") {
    for (const char* c : kCompressors)
        for (const char* fam : {"ring", "exponential", "random_matching", "one_peer_exponential"})
            for (bool fifo : {true, false}) {
                CAPTURE(std::string(c));
                CAPTURE(std::string(fam));
                CAPTURE(fifo);
                Network net = consensus(family(fam, 8), 30,
                                        fmt::format(R"({{"gamma": 0.3, "compressor": {}}})", c));
                auto h = net.harness(jittery(fifo));
                REQUIRE(h.run());
                check_replicas_match(net);
                const bool varying = std::string(fam) == "random_matching" ||
                                     std::string(fam) == "one_peer_exponential";
                CHECK(net.at<Choco>(0).shared_replica() == !varying);
                for (int i = 0; i < 8; ++i) CHECK(net.at<Choco>(i).stats().rounds == 30);
            }
}

TEST_CASE("consensus-only choco with top-k 10% on a ring reaches consensus and keeps the sum") {
    for (const char* fam : {"ring", "random_matching", "one_peer_exponential"}) {
        CAPTURE(std::string(fam));
        Network net =
            consensus(family(fam, 8), 600,
                      R"({"gamma": 0.3, "compressor": {"name": "topk", "fraction": 0.1}})");
        const auto before = net.models();
        auto h = net.harness(jittery());
        REQUIRE(h.run());
        const auto after = net.models();
        CAPTURE(disagreement(before));
        CAPTURE(disagreement(after));
        CHECK(disagreement(after) < 1e-3 * disagreement(before));
        // Doubly-stochastic W: sum_i x_i is invariant up to float rounding.
        CHECK(max_abs_diff(mean_of(after), mean_of(before)) < 1e-5);
    }
}

TEST_CASE("every compressor reaches consensus on the exponential graph") {
    // Sparse compressors need a smaller consensus step (CHOCO: gamma of order delta = k/n).
    const double gammas[] = {0.4, 0.4, 0.1, 0.05};
    for (std::size_t q = 0; q < 4; ++q) {
        const std::string c = kCompressors[q];
        CAPTURE(c);
        Network net = consensus(family("exponential", 8), 400,
                                fmt::format(R"({{"gamma": {}, "compressor": {}}})", gammas[q], c));
        const auto before = net.models();
        auto h = net.harness(jittery());
        REQUIRE(h.run());
        const auto after = net.models();
        CAPTURE(disagreement(after));
        CHECK(disagreement(after) < 1e-3 * disagreement(before));
        CHECK(max_abs_diff(mean_of(after), mean_of(before)) < 1e-5);
    }
}

TEST_CASE("choco counts the exact bytes on the wire, in math and cost-only mode") {
    const std::size_t d = 1000;
    const std::int64_t steps = 5;
    for (bool math : {true, false})
        for (const char* c : kCompressors) {
            CAPTURE(std::string(c));
            CAPTURE(math);
            json::Document doc =
                json::parse_text(fmt::format(R"({{"compressor": {}}})", c), "choco.json");
            json::Node node(doc);
            Network net = make_network(family("ring", 4), steps, make_choco, &node,
                                       [&](int i) -> std::unique_ptr<gossamer::proto::LocalWorker> {
                                           if (!math) return std::make_unique<CostOnlyWorker>(d);
                                           return std::make_unique<QuadraticWorker>(
                                               random_vector(d, static_cast<unsigned>(i)));
                                       });
            std::uint64_t seen = 0;
            auto h = net.harness();
            h.on_send = [&](const Message& m) {
                CHECK(m.payload.size() == (math ? m.elements : 0));
                if (m.kind == MessageKind::full_model) CHECK(m.elements == d);
                seen += m.wire_bytes();
            };
            REQUIRE(h.run());
            const auto& q = net.at<Choco>(0).compressor();
            // Ring of 4: two out-neighbours; one full model then steps - 1 deltas on each edge.
            const std::uint64_t per_edge =
                (kHeaderBytes + 4 * d) +
                (steps - 1) * (kHeaderBytes + 4 * ((q.encoded_bytes(d) + 3) / 4));
            CHECK(net.at<Choco>(0).stats().bytes_sent == 2 * per_edge);
            CHECK(net.at<Choco>(0).stats().bytes_received == 2 * per_edge);
            CHECK(seen == 4 * 2 * per_edge);
        }
}

TEST_CASE("choco options: defaults, bad values name their path, topologies it refuses") {
    const auto o = gossamer::proto::parse_choco_options(nullptr);
    CHECK(o.gamma == 0.5);
    CHECK(o.compressor.kind == gossamer::optim::CompressorKind::fp16);

    auto fails_at = [](const std::string& text, const std::string& path) {
        CAPTURE(text);
        json::Document doc = json::parse_text(text, "job.json");
        const json::Node node = json::Node(doc).at("choco");
        try {
            gossamer::proto::parse_choco_options(&node);
            FAIL("no ConfigError");
        } catch (const gossamer::ConfigError& e) {
            CHECK(e.path() == path);
        }
    };
    fails_at(R"({"choco": {"gamma": 0}})", "choco.gamma");
    fails_at(R"({"choco": {"gamma": 1.5}})", "choco.gamma");
    fails_at(R"({"choco": {"gamma": "big"}})", "choco.gamma");
    fails_at(R"({"choco": {"gama": 0.5}})", "choco.gama");
    fails_at(R"({"choco": {"compressor": {"name": "zip"}}})", "choco.compressor.name");
    fails_at(R"({"choco": {"compressor": {"name": "topk", "fraction": 2}}})",
             "choco.compressor.fraction");
    fails_at(R"({"choco": {"resync_timeout": 0}})", "choco.resync_timeout");
    fails_at(R"({"choco": {"compressor": {"name": "int8", "block": 0}}})",
             "choco.compressor.block");

    // Through the registry.
    CostOnlyWorker w(10);
    auto p = gossamer::proto::make_protocol(
        "choco", nullptr, gossamer::proto::PeerContext{0, 8, family("ring", 8), &w, 5});
    CHECK(p->name() == "choco");
    // A directed time-varying graph with doubly stochastic rounds is fine (per-edge replicas)...
    CHECK(make_choco(nullptr,
                     gossamer::proto::PeerContext{0, 8, family("one_peer_exponential", 8), &w, 5})
              ->name() == "choco");
    // ...rounds whose column sums differ from their row sums are not: the average would drift.
    const json::Document doc = json::parse_text(
        R"({"version": 1, "peers": {"count": 3}, "weights": "uniform",
            "graph": {"schedule": [[[0, 1], [1, 2]], [[0, 2]]]}})",
        "path3.json");
    const auto path = gossamer::topology::parse_topology(doc).schedule;
    std::string msg;
    try {
        make_choco(nullptr, gossamer::proto::PeerContext{0, 3, path, &w, 5});
    } catch (const gossamer::TopologyError& e) {
        msg = e.what();
    }
    CHECK(msg.find("choco on a time-varying topology needs doubly stochastic rounds; in round 0") ==
          0);
    CHECK(msg.find("use metropolis_hastings weights") != std::string::npos);
    CHECK_THROWS_AS(
        make_choco(nullptr,
                   gossamer::proto::PeerContext{
                       0, 8, family("one_peer_exponential", 8, topo::WeightRule::push_sum), &w, 5}),
        gossamer::TopologyError);
}

TEST_CASE("choco keeps going without a failed neighbour") {
    Network net =
        consensus(family("ring", 6), 40, R"({"compressor": {"name": "topk", "fraction": 0.2}})");
    auto h = net.harness();
    h.kill(2, 5.5);
    REQUIRE(h.run());
    for (int i = 0; i < 6; ++i)
        if (i != 2) CHECK(net.at<Choco>(i).stats().rounds == 40);
}

TEST_CASE("a lost choco message is re-synchronised with a full replica") {
    for (const char* fam : {"ring", "random_matching"})
        for (const char* c : kCompressors) {
            CAPTURE(std::string(fam));
            CAPTURE(std::string(c));
            Network net = consensus(
                family(fam, 6), 200,
                fmt::format(R"({{"gamma": 0.05, "resync_timeout": 1.5, "compressor": {}}})", c));
            const auto before = net.models();
            auto h = net.harness(jittery());
            // Lose the first two deltas from peer 1 to peer 2 past round 5, one after the other.
            int lost = 0;
            h.drop = [&](const Message& m) {
                if (m.sender == 1 && m.receiver == 2 && m.kind == MessageKind::model_delta &&
                    m.round >= 5 && lost < 2) {
                    ++lost;
                    return true;
                }
                return false;
            };
            REQUIRE(h.run());
            CHECK(h.dropped() == 2);
            CHECK(net.at<Choco>(2).resync_requests() >= 1);
            CHECK(net.at<Choco>(1).resync_answers() >= 1);
            check_replicas_match(net);
            for (int i = 0; i < 6; ++i) CHECK(net.at<Choco>(i).stats().rounds == 200);
            CHECK(disagreement(net.models()) < 0.5 * disagreement(before));  // still converging
        }
}

TEST_CASE("choco asks for no re-sync when nothing is lost") {
    Network net = consensus(family("ring", 6), 50,
                            R"({"resync_timeout": 100, "compressor": {"name": "int8"}})");
    auto h = net.harness(jittery(false));
    REQUIRE(h.run());
    for (int i = 0; i < 6; ++i) CHECK(net.at<Choco>(i).resync_requests() == 0);
}

TEST_CASE("choco shared replicas on one-peer exponential: every union out-neighbour gets each q") {
    Network net = consensus(family("one_peer_exponential", 8), 400,
                            R"({"gamma": 0.3, "replicas": "shared",
                                "compressor": {"name": "topk", "fraction": 0.1}})");
    const auto before = net.models();
    auto h = net.harness(jittery(false));
    std::map<int, std::set<int>> receivers;
    h.on_send = [&](const Message& m) {
        if (m.kind != MessageKind::control) receivers[m.sender].insert(m.receiver);
    };
    REQUIRE(h.run());
    CHECK(net.at<Choco>(0).shared_replica());
    check_replicas_match(net);
    for (int i = 0; i < 8; ++i)
        CHECK(receivers[i] == std::set<int>{(i + 1) % 8, (i + 2) % 8, (i + 4) % 8});
    const auto after = net.models();
    CHECK(disagreement(after) < 1e-3 * disagreement(before));
    CHECK(max_abs_diff(mean_of(after), mean_of(before)) < 1e-5);
}

TEST_CASE("choco replicas option: values and the schedules it refuses") {
    CostOnlyWorker w(10);
    auto build = [&](const char* options, std::shared_ptr<const topo::Schedule> s) {
        json::Document doc = json::parse_text(options, "choco.json");
        json::Node node(doc);
        return make_choco(&node, gossamer::proto::PeerContext{0, 8, s, &w, 5});
    };
    auto shared = [&](const char* options) {
        return dynamic_cast<Choco&>(*build(options, family("ring", 8))).shared_replica();
    };
    CHECK_FALSE(shared(R"({"replicas": "per_edge"})"));
    CHECK(shared(R"({"replicas": "auto"})"));
    std::string msg;
    try {
        build(R"({"replicas": "shared"})", family("random_matching", 8));
    } catch (const gossamer::TopologyError& e) {
        msg = e.what();
    }
    CHECK(msg.find("choco with shared replicas needs a periodic topology") == 0);
    try {
        build(R"({"replicas": "both"})", family("ring", 8));
        FAIL("no ConfigError");
    } catch (const gossamer::ConfigError& e) {
        CHECK(e.path() == "replicas");
    }
}
