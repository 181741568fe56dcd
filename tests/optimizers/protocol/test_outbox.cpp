// Push-sum's outbox (docs/algorithms/protocol-contract.md, "The outbox"): at most one share in
// flight per edge, later shares adding up while it is, and the mass exact (sum of w = n to 1e-9
// once every message is delivered) under a straggler and a slow link, in the simulator and with
// inproc peers; and the drivers' check that fails a protocol with two in flight on one edge.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "gossamer/core/cluster.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/optimizers/protocol/registry.hpp"
#include "gossamer/optimizers/protocol/share_outbox.hpp"
#include "gossamer/optimizers/protocols/async/async_gossip.hpp"
#include "gossamer/optimizers/protocols/sgp/sgp.hpp"
#include "gossamer/peer/local.hpp"
#include "gossamer/sim/simulation.hpp"
#include "optimizers/harness/network.hpp"

using namespace gossamer;
using gossamer::testing::QuadraticWorker;

namespace {

proto::Message share(int to, std::int64_t round, double weight, std::vector<float> x,
                     double sent_at = 0) {
    proto::Message m;
    m.kind = proto::MessageKind::mass_share;
    m.receiver = to;
    m.round = round;
    m.edge_seq = static_cast<std::uint64_t>(round);
    m.weight = weight;
    m.sent_at = sent_at;
    m.elements = x.size();
    m.payload = std::move(x);
    return m;
}

std::shared_ptr<const topology::Schedule> exponential(int n) {
    topology::FamilySpec f;
    f.family = "exponential";
    f.n = n;
    f.weights = topology::WeightRule::push_sum;
    return topology::generate(f);
}

// A protocol that breaks its own bound: rank 0 sends two deltas to rank 1 at once.
class TwoAtOnce final : public proto::Protocol {
  public:
    using Protocol::Protocol;
    std::string_view name() const override { return "two_at_once"; }
    std::span<const float> compute_point() override { return worker().params(); }
    void current_model(std::span<float> out) const override { copy_params_to(out); }
    bool one_in_flight_per_edge() const override { return true; }

  protected:
    void on_start(proto::Time, proto::Actions& out) override {
        if (rank() == 0)
            for (int k = 0; k < 2; ++k) {
                proto::Message m;
                m.kind = proto::MessageKind::model_delta;
                m.receiver = 1;
                m.edge_seq = static_cast<std::uint64_t>(k);
                send(out, std::move(m));
            }
        out.done = true;
    }
    void on_step_finished(proto::Time, double, proto::Actions&) override {}
    void on_message(proto::Time, proto::Message, proto::Actions&) override {}
};

}  // namespace

TEST_CASE("outbox: one share in flight per edge, later ones add up and leave when it is free") {
    proto::ShareOutbox box;
    CHECK(box.free(3));
    box.sent(3, 11);
    CHECK_FALSE(box.free(3));
    CHECK(box.free(4));
    box.hold(share(3, 1, 0.25, {1, 2}, 5.0));
    box.hold(share(3, 2, 0.125, {10, 20}, 6.0));
    CHECK(box.pending() == 1);
    CHECK(box.merged() == 1);
    CHECK(box.pending_weight() == 0.375);
    CHECK_THROWS_AS(box.sent(3, 12), Error);                  // the edge is busy
    CHECK_THROWS_AS(box.hold(share(3, 3, 0.1, {1})), Error);  // another length
    CHECK_FALSE(box.completed(99));                           // not a share's id
    auto m = box.completed(11);
    REQUIRE(m);
    CHECK(box.free(3));
    CHECK(box.pending() == 0);
    CHECK(m->weight == 0.375);
    CHECK(m->payload == std::vector<float>{11, 22});
    CHECK(m->round == 2);      // the latest
    CHECK(m->edge_seq == 2);   // the latest share's number
    CHECK(m->sent_at == 5.0);  // the earliest
    box.sent(3, 13);
    box.hold(share(3, 4, 0.5, {1, 1}));
    auto back = box.take(3);  // the receiver failed: the mass comes back
    REQUIRE(back);
    CHECK(back->weight == 0.5);
    CHECK_FALSE(box.take(3));
    CHECK_FALSE(box.completed(13));  // nothing pending any more
}

TEST_CASE("outbox: a share waiting for a receiver that failed comes back to its sender") {
    // Two peers, each keeping half its mass and pushing half to the other; peer 1 never runs.
    const json::Node options(json::parse_text(R"({"outbox": true})", "options.json"));
    QuadraticWorker worker(std::vector<float>(4, 1.0f));
    proto::PeerContext ctx{0, 2, exponential(2), &worker, 10};
    auto p = proto::make_protocol("sgp", &options, ctx);
    auto& sgp = dynamic_cast<proto::Sgp&>(*p);
    CHECK(sgp.one_in_flight_per_edge());
    proto::Actions a;
    sgp.start(0, a);
    REQUIRE(a.start_step);
    a = {};
    sgp.step_finished(1, 0, a);  // the first share leaves: the edge to 1 is busy
    REQUIRE(a.sends.size() == 1);
    CHECK(a.sends[0].msg.weight == 0.5);
    REQUIRE(a.start_step);  // tau = 1: one round ahead is allowed
    a = {};
    sgp.step_finished(2, 0, a);  // the second waits in the outbox
    CHECK(a.sends.empty());
    CHECK(sgp.unsent() == 1);
    CHECK(sgp.outbox().pending_weight() == 0.25);
    CHECK(sgp.mass() == 0.25);
    a = {};
    sgp.peer_failed(3, 1, a);  // its mass comes back; the one in flight is lost with peer 1
    CHECK(sgp.unsent() == 0);
    CHECK(sgp.mass() == 0.5);
    for (float v : worker.params()) CHECK(v == 0.5f);  // x came back with w (zero gradient)
    a = {};
    sgp.send_completed(4, 1, false, a);  // the lost share's completion sends nothing
    CHECK(a.sends.empty());
}

TEST_CASE("outbox in sim: a straggler and a slow link, mass exact and fewer bytes on the link") {
    const auto cfg = optim::parse_training_config(json::parse_text(R"({"seed": 3,
        "data": {"name": "logreg_synthetic", "samples": 1600, "test_samples": 400, "features": 10, "seed": 4},
        "model": {"name": "softmax"}, "optimizer": {"name": "sgd", "lr": 0.2},
        "schedule": {"schedule": "cosine"}, "training": {"epochs": 3, "batch_size": 25}})",
                                                                   "logreg.json"));
    const auto data = optim::load_training_data(cfg);
    const int n = 8;
    auto cluster = homogeneous_cluster(n, 0.01, 1e-4, 1e8);
    cluster.peers[3].factor = 4;  // a straggler
    // One slow link: a share (a few hundred bytes) takes about five of the sender's steps.
    const std::size_t floats = optim::build_model(cfg, data.train)->parameter_count();
    const double share_bytes = static_cast<double>(transport::kHeaderBytes + 4 * floats);
    cluster.links[{1, 2}] = LinkSpec{1e-4, share_bytes / 0.05};
    const auto run = [&](const std::string& algorithm, const char* options) {
        sim::SimSetup s;
        s.algorithm = algorithm;
        s.options = json::Node(json::parse_text(options, "options.json"));
        s.topology = exponential(n);
        s.cluster = &cluster;
        s.config = &cfg;
        s.train = &data.train;
        s.test = &data.test;
        s.epochs = cfg.epochs;
        return sim::simulate(s);
    };
    for (const std::string algorithm : {"sgp", "async"}) {
        CAPTURE(algorithm);
        const auto boxed = run(algorithm, R"({"outbox": true})");
        const auto plain = run(algorithm, R"({"outbox": false})");
        CHECK(boxed.mass == doctest::Approx(n).epsilon(1e-9));
        CHECK(boxed.mass_lost == doctest::Approx(0).epsilon(1e-9));
        for (const auto& p : boxed.peers) CHECK(p.steps == 1600 / n / 25 * 3);
        // Peer 1's shares to 2 add up while the link is busy: fewer messages, fewer bytes.
        CAPTURE(boxed.peers[1].bytes_sent);
        CAPTURE(plain.peers[1].bytes_sent);
        CHECK(boxed.peers[1].bytes_sent < plain.peers[1].bytes_sent);
        CHECK(std::isfinite(boxed.evals.back().loss));
    }
}

TEST_CASE("outbox in sim: a protocol with two in flight on one edge is stopped, naming it") {
    const auto cluster = homogeneous_cluster(2, 0.01, 1e-3, 1e6);
    sim::SimSetup s;
    s.algorithm = "two_at_once";
    s.topology = exponential(2);
    s.cluster = &cluster;
    s.mode = sim::Mode::cost;
    s.model_size = 10;
    s.steps = 1;
    s.protocol_factory = [](proto::PeerContext c) {
        return std::make_unique<TwoAtOnce>(std::move(c));
    };
    try {
        sim::simulate(s);
        FAIL("no error");
    } catch (const Error& e) {
        const std::string what = e.what();
        CAPTURE(what);
        CHECK(what.find("edge 0 -> 1") != std::string::npos);
        CHECK(what.find("in flight") != std::string::npos);
    }
}

TEST_CASE("outbox with inproc peers: a straggler and a slow link, the mass is n to 1e-9") {
    const int n = 4;
    const std::int64_t steps = 30;
    const double step = 0.004;
    for (const char* algorithm : {"sgp", "async"}) {
        CAPTURE(algorithm);
        const json::Node options(json::parse_text(R"({"outbox": true})", "options.json"));
        auto net = gossamer::testing::make_network(
            exponential(n), steps,
            [algorithm](const json::Node* o, proto::PeerContext c) {
                return proto::make_protocol(algorithm, o, std::move(c));
            },
            &options,
            [](int r) {
                return std::make_unique<QuadraticWorker>(
                    gossamer::testing::random_vector(64, 300 + static_cast<std::uint64_t>(r)), 1.0);
            });
        const double share_bytes = transport::kHeaderBytes + 4 * 64;
        const auto out = peer::run_inproc_peers(net.protocols(), net.locals(), [&](int r) {
            peer::DriverOptions o;
            o.run_timeout = peer::Millis(30'000);
            const double declared = r == 3 ? 4 * step : step;  // rank 3 straggles
            o.declared_step_time = [declared](std::int64_t, double) { return declared; };
            // Rank 0's link to 1 takes ten steps per share (merges even on a loaded machine).
            if (r == 0)
                o.link = [share_bytes, step](int to) {
                    return peer::LinkPacing{0, to == 1 ? share_bytes / (10 * step) : 0};
                };
            return o;
        });
        double mass = 0;
        for (int r = 0; r < n; ++r) {
            const auto& o = out[static_cast<std::size_t>(r)];
            REQUIRE(o.error == "");
            REQUIRE(o.result);
            CHECK(o.result->steps == steps);
            mass += net.peers[static_cast<std::size_t>(r)]->mass();
            CHECK(net.peers[static_cast<std::size_t>(r)]->unsent() == 0);
        }
        CHECK(mass == doctest::Approx(n).epsilon(1e-9));
        // Shares to rank 1 waited for the slow link and left merged.
        const auto& box = std::string(algorithm) == "sgp" ? net.at<proto::Sgp>(0).outbox()
                                                          : net.at<proto::AsyncGossip>(0).outbox();
        CHECK(box.merged() > 0);
    }
}

TEST_CASE("outbox with inproc peers: two in flight on one edge fail the peer, naming the edge") {
    auto net = gossamer::testing::make_network(
        exponential(2), 1,
        [](const json::Node*, proto::PeerContext c) {
            return std::make_unique<TwoAtOnce>(std::move(c));
        },
        nullptr, [](int) { return std::make_unique<QuadraticWorker>(std::vector<float>(4)); });
    const auto out = peer::run_inproc_peers(net.protocols(), net.locals(), [](int) {
        peer::DriverOptions o;
        o.run_timeout = peer::Millis(10'000);
        return o;
    });
    CAPTURE(out[0].error);
    CHECK(out[0].error.find("edge 0 -> 1") != std::string::npos);
    CHECK(out[1].error == "");
}
