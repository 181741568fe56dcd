// Measured out-edges (edge_speed.hpp): the estimator on timed transfers, and the same estimator
// fed by the simulator's completions through Protocol::edge_speeds().
#include <doctest/doctest.h>

#include "gossamer/core/cluster.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocol/edge_speed.hpp"
#include "gossamer/sim/simulation.hpp"
#include "gossamer/topology/schedule.hpp"

using namespace gossamer;
using proto::EdgeSpeeds;

TEST_CASE("edge speeds: back-to-back large sends on a 12.5 MB/s edge measure 12.5 MB/s") {
    EdgeSpeeds s;
    const double rate = 12.5e6;
    const std::uint64_t bytes = 1'000'000;
    // Three sends posted at once on a FIFO edge: each takes bytes / rate after the previous one.
    for (std::uint64_t id = 1; id <= 3; ++id) s.posted(id, 4, bytes, 0.0);
    for (std::uint64_t id = 1; id <= 3; ++id)
        s.completed(id, static_cast<double>(id) * static_cast<double>(bytes) / rate, true);
    REQUIRE(s.find(4));
    CHECK(s.find(4)->large_samples == 3);
    CHECK(s.throughput(4) == doctest::Approx(rate).epsilon(1e-9));
    CHECK(s.in_flight() == 0);
    CHECK(s.throughput(5) == 0);  // never sent to: unknown
    CHECK(!s.seconds_for(5, bytes));
    CHECK(*s.seconds_for(4, bytes) == doctest::Approx(0.08));
}

TEST_CASE("edge speeds: the EWMA follows a change of rate, latency comes from small sends") {
    EdgeSpeeds s;  // alpha 0.3
    double t = 0;
    std::uint64_t id = 1;
    for (int k = 0; k < 5; ++k, ++id) {
        s.posted(id, 1, 500'000, t);
        t += 500'000 / 1e8;  // 100 MB/s
        s.completed(id, t, true);
    }
    CHECK(s.throughput(1) == doctest::Approx(1e8));
    for (int k = 0; k < 30; ++k, ++id) {
        t += 1.0;  // idle gaps are not counted: each send is timed from its own post
        s.posted(id, 1, 500'000, t);
        t += 500'000 / 1e7;  // the link drops to 10 MB/s
        s.completed(id, t, true);
    }
    CHECK(s.throughput(1) == doctest::Approx(1e7).epsilon(0.01));
    // Small messages: 2 ms each; a failed send is not measured.
    for (int k = 0; k < 4; ++k, ++id) {
        s.posted(id, 1, 100, t);
        s.completed(id, t + 0.002, true);
    }
    s.posted(id, 1, 100, t);
    s.completed(id, t + 5.0, false);
    CHECK(s.latency(1) == doctest::Approx(0.002));
    CHECK(s.find(1)->small_samples == 4);
    CHECK(s.find(1)->failed == 1);
    // A small send completing between a large one's post and completion does not shorten it.
    s.posted(++id, 1, 1'000'000, t);
    s.posted(++id, 1, 100, t);
    s.completed(id, t + 0.001, true);
    s.completed(id - 1, t + 0.1, true);  // 10 MB/s again, timed from its own post
    CHECK(s.find(1)->last_throughput == doctest::Approx(1e7));
    s.completed(12345, 1.0, true);  // unknown: ignored
    const auto j = s.to_json();
    REQUIRE(j.size() == 1);
    CHECK(j[0]["peer"] == 1);
    CHECK(j[0]["throughput"].get<double>() == doctest::Approx(1e7).epsilon(0.01));
}

TEST_CASE("edge speeds: one queue (the simulator's uplink) times a send from its turn") {
    proto::EdgeSpeedOptions o;
    o.one_queue = true;
    EdgeSpeeds q(o), apart;
    // Two 1 MB sends at t = 0 to different peers through one 10 MB/s queue: done at 0.1, 0.2.
    for (EdgeSpeeds* s : {&q, &apart}) {
        s->posted(1, 1, 1'000'000, 0);
        s->posted(2, 2, 1'000'000, 0);
        s->completed(1, 0.1, true);
        s->completed(2, 0.2, true);
    }
    CHECK(q.throughput(1) == doctest::Approx(1e7));
    CHECK(q.throughput(2) == doctest::Approx(1e7));
    CHECK(apart.throughput(2) == doctest::Approx(5e6));  // independent edges: it took 0.2 s
    // A send posted after the queue emptied is timed from its own post.
    q.posted(3, 2, 1'000'000, 1.0);
    q.completed(3, 1.05, true);
    CHECK(q.find(2)->last_throughput == doctest::Approx(2e7));
}

TEST_CASE("edge speeds: bad options and ids out of order are errors") {
    CHECK_THROWS_AS(EdgeSpeeds({0.0, 65536, 4096}), Error);
    CHECK_THROWS_AS(EdgeSpeeds({0.5, 4096, 4096}), Error);
    EdgeSpeeds s;
    s.posted(5, 0, 10, 0);
    CHECK_THROWS_AS(s.posted(5, 0, 10, 0), Error);
}

TEST_CASE("edge speeds: merged into a protocol's per-edge metrics") {
    EdgeSpeeds s;
    s.observe(2, 1'000'000, 0, 0.1);
    s.observe(3, 100, 0, 0.01);
    json::Json edges = json::Json::array();
    edges.push_back({{"peer", 1}, {"pushes", 3}});
    edges.push_back({{"peer", 2}, {"pushes", 4}});
    const auto m = proto::merge_edge_speeds(edges, s);
    REQUIRE(m.size() == 3);
    CHECK(!m[0].contains("throughput"));
    CHECK(m[1]["throughput"].get<double>() == doctest::Approx(1e7));
    CHECK(m[1]["pushes"] == 4);
    CHECK(m[2]["peer"] == 3);
    CHECK(m[2]["latency"].get<double>() == doctest::Approx(0.01));
    CHECK(proto::merge_edge_speeds(nullptr, EdgeSpeeds{}).is_null());
}

TEST_CASE("edge speeds: the simulator's completions measure each peer's uplink") {
    // Two peers, async cost-only with 1 MB shares; rank 0's uplink is 10 MB/s, rank 1's 100.
    // (Each peer has one out-edge: with more, sends that share a busy uplink are slower per
    // edge, and that is what the estimator reports: delivered throughput under the load.)
    auto cluster = homogeneous_cluster(2, 0.05, 1e-4, 1e9);
    for (auto& p : cluster.peers) p.uplink = p.downlink = 1e8;
    cluster.peers[0].uplink = 1e7;
    // The fifo network: an uplink serialises its messages, as one TCP connection per edge does
    // (the fair model shares the uplink among the messages in flight, so the overlapping shares
    // of this test would each see half of it, and that is what the estimator would report).
    cluster.network_model = NetworkModel::fifo;
    topology::FamilySpec fam;
    fam.family = "complete";
    fam.n = 2;
    for (const bool outbox : {false, true}) {
        sim::SimSetup s;
        s.algorithm = "async";
        s.options = json::Node(json::parse_text(outbox ? R"({"outbox": true})" : "{}", "o.json"));
        s.topology = topology::generate(fam);
        s.cluster = &cluster;
        s.mode = sim::Mode::cost;
        s.model_size = 250'000;
        s.steps = 40;
        const auto r = sim::simulate(s);
        for (const auto& p : r.peers) {
            CAPTURE(p.rank);
            CAPTURE(outbox);
            REQUIRE(p.edges.is_array());
            int measured = 0;
            for (const auto& e : p.edges) {
                if (!e.contains("throughput") || !e["out"].get<bool>()) continue;
                ++measured;
                const double expect = p.rank == 0 ? 1e7 : 1e8;
                CHECK(e["throughput"].get<double>() == doctest::Approx(expect).epsilon(0.1));
                CHECK(e["link_samples"].get<std::int64_t>() > 5);
            }
            CHECK(measured == 1);
        }
    }
}

TEST_CASE("edge speeds: measure off keeps nothing (the simulator's unrecorded peers)") {
    proto::EdgeSpeedOptions o;
    o.measure = false;
    EdgeSpeeds s(o);
    s.posted(1, 4, 1'000'000, 0.0);
    s.handed_over(1, 0.01);
    s.completed(1, 0.08, true);
    s.observe(5, 1'000'000, 0.0, 0.08);
    s.posted(1, 4, 1'000'000, 0.1);  // no id check either: nothing is pending
    s.forget(1);
    CHECK(s.in_flight() == 0);
    CHECK(s.edges().size() == 0);
    CHECK(!s.find(4));
    CHECK(s.throughput(4) == 0);
    CHECK(proto::merge_edge_speeds(nullptr, s).is_null());
}
