// The async protocol (wait-free push-sum, straggler-aware sender-side weights) on the harness
// without send completions: exact mass, no dropped share, consensus, the edge bound, the self
// share, deadlines.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocol/registry.hpp"
#include "gossamer/optimizers/protocols/async/async_gossip.hpp"
#include "gossamer/topology/generators.hpp"
#include "gossamer/topology/schedule.hpp"
#include "optimizers/harness/network.hpp"

using namespace gossamer::testing;
using gossamer::proto::AsyncGossip;
using gossamer::proto::make_async;
using gossamer::proto::MessageKind;
using gossamer::testing::Network;
using gossamer::testing::QuadraticWorker;
namespace topo = gossamer::topology;
namespace json = gossamer::json;

namespace {

std::shared_ptr<const topo::Schedule> family(const char* name, int n) {
    topo::FamilySpec f;
    f.family = name;
    f.n = n;
    f.weights = topo::WeightRule::push_sum;
    return topo::generate(f);
}

// These runs deliver no send completions (driver() below), so they run async without its outbox
// (on by default since issue 37) unless they say otherwise: the rule itself, every share on its
// own. The outbox is tested with drivers that complete sends
// (tests/optimizers/protocol/test_outbox.cpp).
std::string without_outbox(const std::string& options) {
    auto j = json::Json::parse(options);
    if (!j.contains("outbox")) j["outbox"] = false;
    return j.dump();
}

Network async_network(std::shared_ptr<const topo::Schedule> s, std::int64_t steps,
                      const std::string& options = "{}", std::size_t d = 4) {
    json::Document doc = json::parse_text(without_outbox(options), "async.json");
    json::Node node(doc);
    return gossamer::testing::make_network(s, steps, make_async, &node, [d](int i) {
        return std::make_unique<QuadraticWorker>(
            gossamer::testing::random_vector(d, 500 + static_cast<unsigned>(i)));
    });
}

// The harness in virtual seconds delivering no send completions: the minimal driver these tests
// were written for.
Harness driver(const Network& net, HarnessOptions o) {
    o.clock = Clock::seconds;
    o.complete_sends = false;
    return net.harness(std::move(o));
}

AsyncGossip& peer(const Network& net, int i) {
    return net.at<AsyncGossip>(i);
}

// w over every peer (a dead one's frozen state included), buffers, in flight and undeliverable.
double total_mass(const Network& net, const Harness& d) {
    double m = 0;
    for (int i = 0; i < net.n(); ++i) m += peer(net, i).mass() + peer(net, i).buffered_mass();
    for (const Message* msg : d.in_flight()) m += msg->weight;
    for (const Message& msg : d.undeliverable()) m += msg.weight;
    return m;
}

std::vector<double> total_x(const Network& net, const Harness& d) {
    std::vector<double> s(net.workers[0]->size(), 0.0);
    auto add = [&](std::span<const float> v) {
        for (std::size_t k = 0; k < s.size(); ++k) s[k] += v[k];
    };
    for (int i = 0; i < net.n(); ++i) {
        add(net.workers[static_cast<std::size_t>(i)]->params());
        add(peer(net, i).buffered_x());
    }
    // Rate reports (control messages) carry no model values.
    for (const Message* msg : d.in_flight())
        if (msg->kind == MessageKind::mass_share) add(msg->payload);
    for (const Message& msg : d.undeliverable())
        if (msg.kind == MessageKind::mass_share) add(msg.payload);
    return s;
}

std::vector<double> sum_of(const std::vector<std::vector<double>>& xs) {
    std::vector<double> s(xs.front().size(), 0.0);
    for (const auto& x : xs)
        for (std::size_t k = 0; k < s.size(); ++k) s[k] += x[k];
    return s;
}

const std::vector<double> kRates = {1.0, 1.0, 4.0, 1.5, 1.0, 2.5, 1.0, 0.7};

}  // namespace

TEST_CASE("async conserves mass and x after every event: delays, reordering, rates, a failure") {
    for (bool aware : {true, false})
        for (bool kill : {false, true}) {
            CAPTURE(aware);
            CAPTURE(kill);
            Network net = async_network(
                family("exponential", 8), 120,
                fmt::format(R"({{"straggler_aware": {}, "targets": {}}})", aware, kill ? 2 : 1));
            const auto sum0 = sum_of(net.models());
            HarnessOptions o;
            o.step_times = kRates;
            o.step_jitter = 0.5;
            o.delay = 0.2;
            o.delay_jitter = 3.0;
            o.fifo_channels = false;  // shares overtake each other
            o.seed = 7;
            Harness d = driver(net, o);
            if (kill) d.kill(3, 30.3);
            double worst_mass = 0, worst_x = 0;
            std::int64_t events = 0, sent = 0, buffered = 0;
            d.on_send = [&](const Message& m) { sent += m.kind == MessageKind::mass_share; };
            d.after_event = [&] {
                ++events;
                worst_mass = std::max(worst_mass, std::abs(total_mass(net, d) - 8.0));
                worst_x = std::max(worst_x, gossamer::testing::max_abs_diff(total_x(net, d), sum0));
                for (int i = 0; i < 8; ++i) buffered += peer(net, i).buffered_shares() > 0;
            };
            REQUIRE(d.run());
            CHECK(events > 1000);
            CHECK(worst_mass < 1e-12);
            CHECK(worst_x < 1e-4);
            CHECK(buffered > 0);
            CHECK(d.waits() == 0);  // wait-free: every step starts as the last one ends
            CHECK(d.in_flight().empty());
            // No share dropped: every one sent was absorbed, or reached a dead peer.
            std::int64_t received = 0, absorbed = 0;
            for (int i = 0; i < 8; ++i) {
                if (kill && i == 3) continue;
                CHECK(peer(net, i).steps() == 120);
                CHECK(peer(net, i).buffered_shares() == 0);
                for (const auto& e : peer(net, i).edges()) {
                    received += e.shares;
                    absorbed += e.absorbed;
                }
            }
            CHECK(received == absorbed);
            std::int64_t to_dead_absorbed = 0;
            if (kill)
                for (const auto& e : peer(net, 3).edges()) to_dead_absorbed += e.shares;
            const auto lost_shares =
                std::count_if(d.undeliverable().begin(), d.undeliverable().end(),
                              [](const Message& m) { return m.kind == MessageKind::mass_share; });
            CHECK(received + to_dead_absorbed + lost_shares == sent);
            if (kill) {
                double est = 0;
                for (int i = 0; i < 8; ++i) est = std::max(est, peer(net, i).stats().mass_lost);
                CHECK(est > 0);
                double survivors = 0;
                for (int i = 0; i < 8; ++i)
                    if (i != 3) survivors += peer(net, i).mass();
                CHECK(survivors < 8.0 - 0.05);
            }
        }
}

TEST_CASE("async z converges to the true average in a consensus-only run") {
    for (const char* fam : {"exponential", "ring", "one_peer_exponential"}) {
        CAPTURE(fam);
        Network net = async_network(family(fam, 8), 600);
        const auto avg = gossamer::testing::mean_of(net.models());
        HarnessOptions o;
        o.step_times = kRates;
        o.delay_jitter = 0.5;
        Harness d = driver(net, o);
        REQUIRE(d.run());
        double spread = 0;
        for (int i = 0; i < 8; ++i) spread = std::max(spread, std::abs(peer(net, i).mass() - 1));
        CHECK(spread > 0.05);  // x alone is biased; z = x / w is not
        for (const auto& z : net.models()) CHECK(gossamer::testing::max_abs_diff(z, avg) < 1e-4);
    }
}

TEST_CASE("every base out-edge is used at least once in every edge_bound steps") {
    for (const char* opts :
         {R"({"target_power": 8})", R"({"target_power": 8, "edge_bound": 4})",
          R"({"targets": 2, "edge_bound": 3, "target_power": 4})", R"({"edge_bound": 1})"}) {
        CAPTURE(opts);
        const auto s = family("exponential", 8);
        Network net = async_network(s, 150, opts);
        HarnessOptions o;
        o.step_times = kRates;
        Harness d = driver(net, o);
        std::map<std::pair<int, int>, std::int64_t> last;
        std::map<std::pair<int, int>, int> uses;
        std::int64_t worst_gap = 0, bound_gap = 0;
        int off_graph = 0;
        d.on_send = [&](const Message& m) {
            if (m.kind != MessageKind::mass_share) return;
            off_graph += !s->at(0)->graph.has_edge(m.sender, m.receiver);
            auto [it, fresh] = last.try_emplace({m.sender, m.receiver}, -1);
            const std::int64_t gap = m.round - it->second;
            worst_gap = std::max(worst_gap, gap);
            bound_gap += gap > peer(net, m.sender).edge_bound();
            it->second = m.round;
            ++uses[{m.sender, m.receiver}];
        };
        REQUIRE(d.run());
        CHECK(off_graph == 0);
        CHECK(bound_gap == 0);
        for (const auto& e : s->at(0)->graph.edges()) CHECK(uses[{e.from, e.to}] >= 2);
        CHECK(worst_gap >= 2);
    }
}

TEST_CASE("the self share is base_self at equal rates and grows for a slower peer") {
    SUBCASE("equal rates") {
        Network net = async_network(family("exponential", 8), 60, R"({"base_self": 0.6})");
        Harness d = driver(net, {});
        REQUIRE(d.run());
        for (int i = 0; i < 8; ++i) CHECK(peer(net, i).self_share() == doctest::Approx(0.6));
    }
    SUBCASE("peer 0 four times slower") {
        Network net = async_network(family("symmetric_exponential", 8), 200);
        HarnessOptions o;
        o.step_times = {4.0};
        Harness d = driver(net, o);
        double s0 = 0, s1 = 0, r0 = 0;
        bool sampled = false;
        d.after_event = [&] {
            if (sampled || d.now() < 60) return;
            sampled = true;
            s0 = peer(net, 0).self_share();
            s1 = peer(net, 1).self_share();
            r0 = peer(net, 0).own_rate() / peer(net, 0).neighbour_rate();
        };
        REQUIRE(d.run());
        CHECK(r0 == doctest::Approx(0.25).epsilon(0.05));
        CHECK(s0 == doctest::Approx(0.5 + 0.5 * 0.75).epsilon(0.02));
        CHECK(s1 == doctest::Approx(0.5));
        // The fast peers push to peer 0 less often than to their fast targets.
        CHECK(peer(net, 1).edge(0).pushes < peer(net, 1).edge(2).pushes);
        CHECK(d.waits() == 0);
    }
    SUBCASE("straggler_aware false keeps base_self") {
        Network net = async_network(family("exponential", 8), 100, R"({"straggler_aware": false})");
        HarnessOptions o;
        o.step_times = {4.0};
        Harness d = driver(net, o);
        REQUIRE(d.run());
        // Peer 0 ends last: its neighbours are finished, so it keeps everything at the end; its
        // latest push to a neighbour still split its mass uniformly.
        CHECK(peer(net, 0).self_share() == 1.0);
        for (const auto& e : peer(net, 0).edges())
            if (e.pushes > 0) CHECK(e.last_fraction == 0.5);
        CHECK(peer(net, 3).self_share() == 0.5);
    }
}

TEST_CASE("a late neighbour is counted at its deadline and its share still absorbed") {
    Network net = async_network(family("ring", 4), 40,
                                R"({"targets": 2, "deadline_percentile": 1, "deadline_cap": 3})");
    HarnessOptions o;
    o.delay_jitter = 0.2;
    Harness d = driver(net, o);
    d.step_time_of = [](int r, double now) {
        return r == 3 && now > 9.5 && now < 10.5 ? 8.0 : 1.0;
    };
    int late_seen = 0;
    bool late3 = false;
    d.after_event = [&] {
        late_seen = std::max(late_seen, peer(net, 0).late_neighbours());
        late3 = late3 || (d.now() > 12 && d.now() < 18 && peer(net, 0).edge(3).late_now);
    };
    REQUIRE(d.run());
    const auto& e = peer(net, 0).edge(3);
    CHECK(late3);
    CHECK(late_seen >= 1);
    CHECK(e.late >= 1);
    CHECK(e.late_now == false);  // its share came after all, and was absorbed
    CHECK(e.deadline > 0);
    CHECK(e.deadline <= 3.0);
    CHECK(e.absorbed == e.shares);
    CHECK(e.shares > 20);
    CHECK(d.deadlines() > 0);
    CHECK(d.waits() == 0);
}

TEST_CASE("async on a failed neighbour: no share goes to it, its mass is reported lost") {
    Network net = async_network(family("ring", 5), 80, R"({"straggler_aware": false})");
    Harness d = driver(net, {});
    d.kill(2, 20.5);
    int late_sends = 0;
    d.on_send = [&](const Message& m) { late_sends += m.receiver == 2 && d.now() > 20.56; };
    REQUIRE(d.run());
    CHECK(late_sends == 0);
    CHECK(peer(net, 1).edge(2).failed);
    // Peer 2's only out-neighbours on the ring are 1 and 3; with uniform splits the estimate is
    // its w before the latest split seen, share / (1 - base_self).
    CHECK(std::max(peer(net, 1).stats().mass_lost, peer(net, 3).stats().mass_lost) > 0.2);
    CHECK(peer(net, 0).stats().mass_lost == 0.0);
}

TEST_CASE("bad async options are ConfigErrors naming the JSON path") {
    for (const char* bad :
         {R"({"targets": 0})", R"({"beta": 0})", R"({"base_self": 1})", R"({"base_self": -0.1})",
          R"({"edge_bound": 0})", R"({"deadline_percentile": 1.5})", R"({"deadline_cap": 0})",
          R"({"straggler_aware": 3})", R"({"rate_window": 1})", R"({"target_power": -1})",
          R"({"targetz": 1})", R"({"silence": -1})", R"({"silence_factor": 0.5})"}) {
        CAPTURE(bad);
        json::Document doc = json::parse_text(bad, "async.json");
        json::Node node(doc);
        CHECK_THROWS_AS(gossamer::proto::parse_async_options(&node), gossamer::ConfigError);
    }
    json::Document doc = json::parse_text(R"({"a": {"base_self": 2}})", "cfg.json");
    json::Node node(doc);
    try {
        const auto a = node.find("a");
        gossamer::proto::parse_async_options(&*a);
        FAIL("no error");
    } catch (const gossamer::ConfigError& e) {
        CHECK(e.path() == "a.base_self");
    }
}

TEST_CASE("async is registered, and cost-only peers send full-size empty shares") {
    const auto names = gossamer::proto::protocol_names();
    CHECK(std::find(names.begin(), names.end(), "async") != names.end());
    const json::Node options(json::parse_text(without_outbox("{}"), "async.json"));
    Network net = gossamer::testing::make_network(
        family("exponential", 8), 10,
        [](const json::Node* o, gossamer::proto::PeerContext c) {
            return gossamer::proto::make_protocol("async", o, std::move(c));
        },
        &options, [](int) { return std::make_unique<gossamer::proto::CostOnlyWorker>(300); });
    CHECK(net.peers[0]->name() == "async");
    Harness d = driver(net, {});
    int bad = 0;
    d.on_send = [&](const Message& m) {
        if (m.kind == MessageKind::mass_share) bad += m.elements != 300 || !m.payload.empty();
    };
    REQUIRE(d.run());
    CHECK(bad == 0);
    double mass = 0;
    for (const auto& p : net.peers) mass += p->mass();
    CHECK(mass == doctest::Approx(8.0).epsilon(1e-12));
}

TEST_CASE("balanced shares keep a straggler's mass near 1, without them it becomes a sink") {
    // Peer 0 four times slower on the directed one-peer exponential graph: peers 7 and 6 push
    // to it but never hear from it except through its rate reports.
    for (bool balance : {true, false}) {
        CAPTURE(balance);
        Network net =
            async_network(family("one_peer_exponential", 8), 400,
                          fmt::format(R"({{"balance": {}, "report_every": 2}})", balance));
        HarnessOptions o;
        o.step_times = {4.0};
        Harness d = driver(net, o);
        double w0 = 0;
        bool sampled = false;
        d.after_event = [&] {
            if (sampled || d.now() < 300) return;
            sampled = true;
            w0 = peer(net, 0).mass();
        };
        REQUIRE(d.run());
        const auto& e70 = peer(net, 7).edge(0);
        CHECK(e70.out);
        CHECK_FALSE(e70.in);
        CHECK(e70.reports > 0);
        CHECK(e70.rate == doctest::Approx(0.25).epsilon(0.05));
        CHECK(e70.reported_self == doctest::Approx(0.875).epsilon(0.02));
        if (balance) {
            CHECK(w0 > 0.5);
            CHECK(w0 < 2.0);
            // A push to the slow peer carries a smaller fraction than one to a fast peer.
            CHECK(e70.last_fraction < 0.5 * 0.5);
        } else {
            CHECK(w0 > 3.0);
        }
    }
}

TEST_CASE("staleness counts the receiver's own steps between sending and absorbing") {
    SUBCASE("delay 2.5 steps: every share waits for two step ends") {
        Network net = async_network(family("ring", 4), 30, R"({"targets": 2})");
        HarnessOptions o;
        o.delay = 2.5;
        Harness d = driver(net, o);
        REQUIRE(d.run());
        for (int i = 0; i < 4; ++i)
            for (const auto& e : peer(net, i).edges()) {
                CHECK(e.absorbed > 0);
                CHECK(e.staleness_max == 2);
                // The last shares reach a peer that has stopped stepping: absorbed at once.
                CHECK(e.staleness_mean > 1.8);
            }
    }
    SUBCASE("a slow sender delivered promptly is not stale") {
        Network net = async_network(family("ring", 4), 30, R"({"targets": 2})");
        HarnessOptions o;
        o.step_times = {4.0};
        o.delay = 0.1;
        Harness d = driver(net, o);
        REQUIRE(d.run());
        CHECK(peer(net, 1).edge(0).absorbed > 0);
        CHECK(peer(net, 1).edge(0).staleness_max == 0);
    }
}

TEST_CASE("a silent neighbour (stopped) gets no shares until it is heard again, mass stays exact") {
    // Peer 3 of a ring stops for 20 s at t = 30 (a SIGSTOP, a cut link): without the rule its two
    // neighbours push a share to it every other step, mass that a peer declared lost would take
    // with it (docs/algorithms/async.md, "Silent neighbours").
    const auto shares_to_3 = [](const char* opts, double& mass) {
        Network net = async_network(family("ring", 6), 120, opts);
        Harness d = driver(net, {});
        d.step_time_of = [](int rank, double now) {
            return rank == 3 && now >= 30 && now < 50 ? 50 - now + 1.0 : 1.0;
        };
        int during = 0, late = 0, after = 0;
        d.on_send = [&](const Message& m) {
            if (m.kind != MessageKind::mass_share || m.receiver != 3) return;
            during += m.sent_at >= 30 && m.sent_at < 50;
            late += m.sent_at >= 44 && m.sent_at < 50;
            after += m.sent_at >= 55;
        };
        REQUIRE(d.run());
        mass = total_mass(net, d);
        return std::tuple{during, late, after};
    };
    double mass = 0;
    const auto [during, late, after] = shares_to_3("{}", mass);
    MESSAGE("silence on: " << during << " shares to the stopped peer in its 20 s, " << late
                           << " in the last 6 s, " << after << " after it came back");
    // Judged after 4 times the longest gap of its recent messages (a few steps here).
    CHECK(late == 0);
    CHECK(after > 20);
    CHECK(mass == doctest::Approx(6).epsilon(1e-9));
    const auto [during_off, late_off, after_off] = shares_to_3(R"({"silence": 0})", mass);
    MESSAGE("silence off: " << during_off << " shares in its 20 s, " << late_off
                            << " in the last 6 s");
    CHECK(late_off >= 4);
    CHECK(during_off >= 2 * during);
    CHECK(mass == doctest::Approx(6).epsilon(1e-9));
}
