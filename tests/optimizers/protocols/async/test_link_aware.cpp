// Link-aware async ("links": "aware"; docs/algorithms/async.md, "Link-aware async"): the link
// factor, its options, and 16 peers in the simulator on Dirichlet shards with two slow-linked
// peers: mass exact, every base edge used within the bound, w within 0.5-2, slow edges used less.
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <string>

#include "gossamer/core/cluster.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/optimizers/protocols/async/async_gossip.hpp"
#include "gossamer/optimizers/protocols/async/link_aware.hpp"
#include "gossamer/sim/simulation.hpp"
#include "gossamer/topology/schedule.hpp"

using namespace gossamer;
using proto::Actions;
using proto::AsyncGossip;
using proto::Message;
using proto::Time;

TEST_CASE("link factor: neutral when unknown, 1/m for an edge that needs m steps a share") {
    CHECK(proto::link_factor(std::nullopt, 10, 1) == 1.0);
    CHECK(proto::link_factor(0.5, 0, 1) == 1.0);    // own rate unknown
    CHECK(proto::link_factor(0.05, 10, 1) == 1.0);  // a share within a step (0.1 s)
    CHECK(proto::link_factor(0.4, 10, 1) == doctest::Approx(0.25));
    CHECK(proto::link_factor(0.4, 10, 2) == doctest::Approx(0.0625));
    CHECK(proto::link_factor(0.4, 10, 0) == 1.0);
    CHECK(proto::link_factor(1e12, 10, 1) == 1e-6);  // the floor: still a candidate
}

TEST_CASE("link-aware options: aware implies the outbox, bad values are ConfigErrors") {
    auto parse = [](const char* text) {
        json::Document doc = json::parse_text(text, "async.json");
        json::Node node(doc);
        return proto::parse_async_options(&node);
    };
    CHECK_FALSE(parse("{}").link_aware);
    const auto o = parse(R"({"links": "aware", "link_power": 2})");
    CHECK(o.link_aware);
    CHECK(o.outbox);
    CHECK(o.link_power == 2);
    CHECK_FALSE(parse(R"({"links": "off"})").link_aware);
    for (const char* bad : {R"({"links": "fast"})", R"({"links": true})", R"({"link_power": -1})",
                            R"({"links": "aware", "outbox": false})"}) {
        CAPTURE(bad);
        CHECK_THROWS_AS(parse(bad), ConfigError);
    }
    try {
        parse(R"({"links": "aware", "outbox": false})");
    } catch (const ConfigError& e) {
        CHECK(e.path() == "outbox");
    }
}

namespace {

// What the watcher saw over a run (shared by the 16 peers of one simulation).
struct Seen {
    bool any_done = false;
    double w_min = 1e9, w_max = 0;  // of single steps (a split leaves s w, so these swing)
    std::vector<double> w_sum = std::vector<double>(16, 0.0);  // per peer, over its steps
    std::vector<std::int64_t> w_steps = std::vector<std::int64_t>(16, 0);
    std::int64_t checks = 0, bound_violations = 0;
    std::uint64_t slow_merged = 0;  // pushes the slow peers added into a pending share
};

// Forwards every event to an AsyncGossip and checks it after each step: the w the step was
// de-biased with (before any peer finished) and the age of every live base out-edge.
class Watch final : public proto::Protocol {
  public:
    Watch(proto::PeerContext ctx, proto::AsyncOptions o, Seen& seen)
        : Protocol(ctx), inner_(std::make_unique<AsyncGossip>(ctx, std::move(o))), seen_(seen) {}
    std::string_view name() const override { return "async"; }
    std::span<const float> compute_point() override { return inner_->compute_point(); }
    void current_model(std::span<float> out) const override { inner_->current_model(out); }
    double mass() const override { return inner_->mass(); }
    json::Json edge_metrics() const override { return inner_->edge_report(); }
    bool settled() const override { return inner_->settled(); }
    bool one_in_flight_per_edge() const override { return inner_->one_in_flight_per_edge(); }
    std::size_t unsent() const override { return inner_->unsent(); }

  protected:
    void on_start(Time now, Actions& out) override {
        inner_->configure_edge_speeds(edge_speeds().options());  // the driver set the outer's
        inner_->start(now, out);
    }
    void on_step_finished(Time now, double loss, Actions& out) override {
        const double w = inner_->mass() + inner_->buffered_mass();  // what the step divides by
        inner_->step_finished(now, loss, out);
        if (!seen_.any_done) {
            seen_.w_min = std::min(seen_.w_min, w);
            seen_.w_max = std::max(seen_.w_max, w);
        }
        if (!seen_.any_done) {
            seen_.w_sum[static_cast<std::size_t>(rank())] += w;
            ++seen_.w_steps[static_cast<std::size_t>(rank())];
        }
        seen_.any_done = seen_.any_done || inner_->done();
        if (rank() == 2 || rank() == 5) {
            slow_merged_now_ = inner_->outbox().merged();
            seen_.slow_merged = std::max(seen_.slow_merged, slow_merged_now_);
        }
        const std::int64_t t = inner_->steps() - 1;  // the step that just pushed
        for (const auto& e : inner_->edges()) {
            if (!e.out || e.failed || e.finished) continue;
            ++seen_.checks;
            if (e.last_push < t - inner_->edge_bound() + 1) ++seen_.bound_violations;
        }
    }
    void on_message(Time now, Message msg, Actions& out) override {
        inner_->message_arrived(now, std::move(msg), out);
    }
    void on_send_completed(Time now, std::uint64_t id, bool ok, Actions& out) override {
        inner_->send_completed(now, id, ok, out);
    }
    void on_deadline(Time now, std::uint64_t id, Actions& out) override {
        inner_->deadline_reached(now, id, out);
    }
    void on_peer_failed(Time now, int rank, Actions& out) override {
        inner_->peer_failed(now, rank, out);
    }

  private:
    std::unique_ptr<AsyncGossip> inner_;
    Seen& seen_;
    std::uint64_t slow_merged_now_ = 0;
};

}  // namespace

TEST_CASE("link-aware async on Dirichlet shards (alpha 0.5, 16 peers, sim): exact mass, bound, w") {
    const auto cfg = optim::parse_training_config(json::parse_text(R"({"seed": 3,
        "data": {"name": "logreg_synthetic", "samples": 3200, "test_samples": 400, "features": 20, "seed": 5},
        "sharding": {"mode": "dirichlet", "alpha": 0.5},
        "model": {"name": "mlp", "hidden": [1024]}, "optimizer": {"name": "sgd", "lr": 0.1},
        "training": {"epochs": 1, "batch_size": 10}})",
                                                                   "dirichlet.json"));
    const auto data = optim::load_training_data(cfg);
    // 20 ms steps; 1 Gbit/s everywhere but the uplinks of ranks 2 and 5, 20 Mbit/s: a share
    // (23,554 floats, 94 kB) takes about 2 steps to leave them.
    auto cluster = homogeneous_cluster(16, 0.02, 1e-4, 1.25e8);
    for (int r : {2, 5}) cluster.peers[static_cast<std::size_t>(r)].uplink = 2.5e6;
    topology::FamilySpec fam;
    fam.family = "exponential";
    fam.n = 16;
    const auto topo = topology::generate(fam);
    Seen off, aware;
    for (const bool links : {false, true}) {
        CAPTURE(links);
        Seen& seen = links ? aware : off;
        proto::AsyncOptions o;
        o.outbox = true;
        o.link_aware = links;
        // B = 16: the edge bound forces a peer of out-degree d to push on each edge once per
        // A = B - d + 1 steps; a slow peer can only carry one share per 2 steps, so a smaller
        // B would force more shares into its queue than it drains (docs/algorithms/async.md).
        o.edge_bound = 16;
        sim::SimSetup s;
        s.algorithm = "async";
        s.topology = topo;
        s.cluster = &cluster;
        s.config = &cfg;
        s.train = &data.train;
        s.test = &data.test;
        s.epochs = cfg.epochs;
        s.protocol_factory = [&](proto::PeerContext ctx) {
            // Every peer takes 150 steps (its trainer cycles through its shard), so that w
            // reflects the rule and not peers leaving at different times. (Dirichlet shards
            // differed in size, and so their epochs in steps, until 2026-12-07.)
            ctx.max_steps = 150;
            auto w = std::make_unique<Watch>(ctx, o, seen);
            return std::unique_ptr<proto::Protocol>(std::move(w));
        };
        const auto r = sim::simulate(s);
        CHECK(r.mass == doctest::Approx(16.0).epsilon(1e-9));
        CHECK(seen.checks > 1000);
        CHECK(seen.bound_violations == 0);
        // The weight each peer's steps divide by, averaged over its steps: a peer whose mean
        // w drifted from 1 would weigh its shard's gradients by it (bias on non-iid shards).
        // Single steps swing (a split leaves s w, a burst of shares adds several).
        MESSAGE("links " << links << ": w of single steps " << seen.w_min << ".." << seen.w_max);
        double lo = 1e9, hi = 0;
        for (std::size_t r = 0; r < 16; ++r) {
            CAPTURE(r);
            REQUIRE(seen.w_steps[r] > 100);
            const double mean = seen.w_sum[r] / static_cast<double>(seen.w_steps[r]);
            lo = std::min(lo, mean);
            hi = std::max(hi, mean);
        }
        MESSAGE("links " << links << ": mean w of the peers " << lo << ".." << hi);
        if (links) {
            CHECK(lo >= 0.5);
            CHECK(hi <= 2.0);
        }
    }
    // Without the rule the slow peers push every step into their busy edges' outboxes (mass
    // out of the mixing); with it they push when an edge is free (or forced).
    MESSAGE("pushes the slow peers merged into waiting shares: "
            << off.slow_merged << " without, " << aware.slow_merged << " with link awareness");
    CHECK(aware.slow_merged < off.slow_merged / 4);
    CHECK(off.slow_merged > 10);
}

TEST_CASE("link-aware async pushes less often on a slow edge, which stays used within the bound") {
    // 8 peers (cost-only, 94 kB shares, 20 ms steps); the link 0 -> 1 carries 1 MB/s, a share
    // takes about 5 steps on it; every other link 1 Gbit/s.
    auto cluster = homogeneous_cluster(8, 0.02, 1e-4, 1.25e8);
    cluster.links[{0, 1}] = LinkSpec{1e-4, 1e6};
    topology::FamilySpec fam;
    fam.family = "exponential";
    fam.n = 8;
    std::int64_t pushes[2] = {0, 0}, other[2] = {0, 0};
    for (const bool links : {false, true}) {
        sim::SimSetup s;
        s.algorithm = "async";
        s.options = json::Node(json::parse_text(links ? R"({"links": "aware", "edge_bound": 16})"
                                                      : R"({"outbox": true, "edge_bound": 16})",
                                                "async.json"));
        s.topology = topology::generate(fam);
        s.cluster = &cluster;
        s.mode = sim::Mode::cost;
        s.model_size = 23'554;
        s.steps = 300;
        const auto r = sim::simulate(s);
        CHECK(r.mass == doctest::Approx(8.0).epsilon(1e-9));
        for (const auto& e : r.peers[0].edges) {
            if (!e["out"].get<bool>()) continue;
            if (e["peer"] == 1) {
                pushes[links] = e["pushes"].get<std::int64_t>();
                CHECK(e["throughput"].get<double>() == doctest::Approx(1e6).epsilon(0.1));
            } else {
                other[links] += e["pushes"].get<std::int64_t>();
            }
        }
    }
    MESSAGE("pushes on the slow edge 0 -> 1: " << pushes[0] << " without, " << pushes[1]
                                               << " with link awareness");
    CHECK(pushes[1] < 0.6 * pushes[0]);
    CHECK(pushes[1] >= 300 / 16);  // used at least once in every B = 16 steps
    MESSAGE("pushes on the fast edges of peer 0: " << other[0] << " without, " << other[1]
                                                   << " with link awareness");
}
