#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <map>
#include <string>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocols/sgp/sgp.hpp"
#include "gossamer/topology/generators.hpp"
#include "gossamer/topology/schedule.hpp"
#include "optimizers/harness/network.hpp"

using namespace gossamer::testing;
using gossamer::proto::CostOnlyWorker;
using gossamer::proto::make_sgp;
using gossamer::proto::MessageKind;
using gossamer::proto::Sgp;
namespace topo = gossamer::topology;
namespace json = gossamer::json;

namespace {

// Two directed rounds with uneven out-degrees: push-sum weights are column- but not
// row-stochastic, so plain averaging would be biased.
std::shared_ptr<const topo::Schedule> directed_schedule(bool time_varying) {
    std::vector<topo::Round> rounds;
    auto add = [&](std::vector<topo::Edge> edges) {
        topo::Digraph g(5, std::move(edges));
        auto w = topo::make_weights(g, topo::WeightRule::push_sum);
        rounds.push_back({std::move(g), std::move(w)});
    };
    add({{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 0}, {0, 2}, {0, 3}, {1, 3}, {2, 0}});
    if (time_varying) add({{0, 4}, {4, 3}, {3, 2}, {2, 1}, {1, 0}, {3, 0}, {4, 1}});
    return topo::make_periodic(std::move(rounds), topo::WeightKind::push_sum, "test digraph");
}

Network sgp_network(std::shared_ptr<const topo::Schedule> s, std::int64_t steps, int tau,
                    std::size_t d = 4) {
    json::Document doc = json::parse_text(fmt::format(R"({{"staleness": {}}})", tau), "p.json");
    json::Node node(doc);
    return make_network(s, steps, make_sgp, &node, [d](int i) {
        return std::make_unique<QuadraticWorker>(random_vector(d, 300 + static_cast<unsigned>(i)));
    });
}

// Sum over live peers of w plus the receive buffer, plus the weight in flight.
double total_mass(const Network& net, const Harness& h) {
    double m = 0;
    for (int i = 0; i < net.n(); ++i)
        if (h.alive(i)) m += net.at<Sgp>(i).mass() + net.at<Sgp>(i).buffered_mass();
    for (const Message* msg : h.in_flight()) m += msg->weight;
    return m;
}

// The same for x, element by element.
std::vector<double> total_x(const Network& net, const Harness& h) {
    std::vector<double> s(net.workers[0]->size(), 0.0);
    for (int i = 0; i < net.n(); ++i) {
        const auto x = net.workers[static_cast<std::size_t>(i)]->params();
        const auto b = net.at<Sgp>(i).buffered_x();
        for (std::size_t k = 0; k < s.size(); ++k) s[k] += x[k] + b[k];
    }
    for (const Message* msg : h.in_flight())
        for (std::size_t k = 0; k < s.size(); ++k) s[k] += msg->payload[k];
    return s;
}

}  // namespace

TEST_CASE("push-sum conserves mass and x at every moment and de-biases exactly under delays") {
    for (bool time_varying : {false, true})
        for (int tau : {0, 1, 3}) {
            CAPTURE(time_varying);
            CAPTURE(tau);
            Network net = sgp_network(directed_schedule(time_varying), 150, tau);
            const auto x0 = net.models();
            const auto avg = mean_of(x0);
            HarnessOptions o = seconds_clock();
            o.fifo_channels = false;  // shares may overtake each other
            o.step_jitter = 0.8;
            o.delay_jitter = 2.5;
            o.seed = static_cast<std::uint64_t>(tau) + 1;
            auto h = net.harness(o);
            std::vector<double> sum0(avg.size());
            for (std::size_t k = 0; k < avg.size(); ++k) sum0[k] = avg[k] * 5;
            double worst_mass = 0, worst_x = 0;
            std::int64_t max_ahead = -1, events = 0, buffered_while_stepping = 0;
            int buffer_outside_step = 0, over_tau = 0;
            h.after_event = [&] {
                ++events;
                worst_mass = std::max(worst_mass, std::abs(total_mass(net, h) - 5.0));
                worst_x = std::max(worst_x, max_abs_diff(total_x(net, h), sum0));
                for (int i = 0; i < 5; ++i) {
                    const auto& p = net.at<Sgp>(i);
                    if (!p.stepping()) {
                        buffer_outside_step += p.buffered_mass() != 0.0;
                        continue;
                    }
                    buffered_while_stepping += p.buffered_mass() > 0.0;
                    // While step s = round() runs, the peer is s - 1 - c rounds ahead.
                    const std::int64_t ahead = p.round() - 1 - p.absorbed_through();
                    max_ahead = std::max(max_ahead, ahead);
                    over_tau += ahead > tau;
                }
            };
            REQUIRE(h.run());
            CHECK(events > 1000);
            CHECK(worst_mass < 1e-12);
            CHECK(worst_x < 1e-5);
            CHECK(over_tau == 0);
            CHECK(max_ahead == tau);  // the delays are long enough to use the whole bound
            CHECK(buffered_while_stepping > 0);
            CHECK(buffer_outside_step == 0);
            CHECK(h.in_flight().empty());
            double w_spread = 0;
            for (int i = 0; i < 5; ++i) {
                const auto& p = net.at<Sgp>(i);
                CHECK(p.stats().rounds == 150);
                CHECK(p.round() == 150);
                w_spread = std::max(w_spread, std::abs(p.mass() - 1.0));
            }
            CHECK(w_spread > 0.05);  // x alone is biased; z = x / w is not
            for (const auto& z : net.models()) CHECK(max_abs_diff(z, avg) < 1e-5);
        }
}

TEST_CASE("sgp shares carry the sender's column of W and follow the topology's rounds") {
    const auto s = directed_schedule(true);
    Network net = sgp_network(s, 6, 1);
    auto h = net.harness();
    std::map<std::pair<int, int>, std::uint64_t> seqs;
    int bad = 0, count = 0;
    h.on_send = [&](const Message& m) {
        ++count;
        const auto round = s->at(m.round);
        bad += m.kind != MessageKind::mass_share;
        bad += !round->graph.has_edge(m.sender, m.receiver);
        bad += m.edge_seq != seqs[{m.sender, m.receiver}]++;
        // w before the split is the weight share divided by W_ji; x's share matches it.
        const double wji = round->weights.at(m.receiver, m.sender);
        bad += !(m.weight > 0 && wji > 0);
        bad += m.elements != 4 || m.payload.size() != 4;
    };
    REQUIRE(h.run());
    CHECK(bad == 0);
    CHECK(count == 3 * (9 + 7));
}

TEST_CASE("sgp on a failed neighbour: shares stop, mass stays conserved among the survivors") {
    // Peer 1 dies; the survivors 0, 2, 3, 4 stay strongly connected.
    Network net = sgp_network(directed_schedule(false), 80, 1);
    auto h = net.harness();
    std::map<std::int64_t, double> split_w;  // w of peer 1 while it ran step r
    std::int64_t last_round_from_1 = -1;
    int late_sends = 0;
    h.after_event = [&] {
        const auto& p = net.at<Sgp>(1);
        if (h.alive(1) && p.stepping()) split_w[p.round()] = p.mass();
    };
    h.on_send = [&](const Message& m) {
        if (m.sender == 1) last_round_from_1 = m.round;
        late_sends += m.receiver == 1 && h.now() > 20.6;
    };
    h.kill(1, 20.5);
    REQUIRE(h.run());
    CHECK(late_sends == 0);
    REQUIRE(last_round_from_1 >= 10);
    const double held = split_w.at(last_round_from_1);
    // Out-neighbours 2 and 3 estimate the dead peer's mass from its last share.
    CHECK(net.at<Sgp>(2).stats().mass_lost == doctest::Approx(held).epsilon(1e-12));
    CHECK(net.at<Sgp>(3).stats().mass_lost == doctest::Approx(held).epsilon(1e-12));
    CHECK(net.at<Sgp>(0).stats().mass_lost == 0.0);
    // Exact accounting: survivors + what the dead peer held + what reached it afterwards = n.
    double survivors = 0, lost = net.at<Sgp>(1).mass() + net.at<Sgp>(1).buffered_mass();
    for (int i : {0, 2, 3, 4}) {
        survivors += net.at<Sgp>(i).mass();
        CHECK(net.at<Sgp>(i).round() == 80);
    }
    for (const auto& m : h.undeliverable()) lost += m.weight;
    CHECK(survivors + lost == doctest::Approx(5.0).epsilon(1e-12));
    CHECK(survivors < 5.0 - 0.1);
    // The survivors agree on one value again.
    CHECK(disagreement(net.models({true, false, true, true, true})) < 1e-4);
}

TEST_CASE("cost-only sgp sends full-size shares without values and still tracks mass") {
    auto s = directed_schedule(true);
    Network net = make_network(s, 8, make_sgp, nullptr,
                               [](int) { return std::make_unique<CostOnlyWorker>(500); });
    Harness h = net.harness();
    int bad = 0;
    h.on_send = [&](const Message& m) { bad += m.elements != 500 || !m.payload.empty(); };
    REQUIRE(h.run());
    CHECK(bad == 0);
    double mass = 0;
    for (int i = 0; i < 5; ++i) mass += net.peers[static_cast<std::size_t>(i)]->mass();
    CHECK(mass == doctest::Approx(5.0).epsilon(1e-12));
}

TEST_CASE("sgp takes column-stochastic weights only, and reads its options") {
    QuadraticWorker w({0.0f});
    auto fam = [](const char* name, int n) {
        topo::FamilySpec spec;
        spec.family = name;
        spec.n = n;
        return topo::generate(spec);
    };
    // Averaging weights on a star: rows sum to 1, columns do not.
    CHECK_THROWS_WITH_AS(make_sgp(nullptr, PeerContext{0, 4, fam("star", 4), &w, 5}),
                         doctest::Contains("column-stochastic"), gossamer::TopologyError);
    // Averaging weights that are also column-stochastic are fine.
    CHECK(make_sgp(nullptr, PeerContext{0, 8, fam("ring", 8), &w, 5})->name() == "sgp");
    CHECK(make_sgp(nullptr, PeerContext{0, 8, fam("one_peer_exponential", 8), &w, 5}));
    CHECK_THROWS_AS(make_sgp(nullptr, PeerContext{0, 5, fam("ring", 8), &w, 5}), gossamer::Error);

    struct Case {
        const char* text;
        const char* expect;
    };
    const Case cases[] = {
        {R"({"staleness": -1})", "proto.json: sgp.staleness: -1 is out of range"},
        {R"({"staleness": 1.5})", "proto.json: sgp.staleness: expected an integer"},
        {R"({"stalenes": 1})",
         "proto.json: sgp.stalenes: unknown key \"stalenes\"; did you mean \"staleness\"?"},
        {R"("fast")", "proto.json: sgp: expected an object"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.text);
        json::Document doc =
            json::parse_text(std::string("{\"sgp\": ") + c.text + "}", "proto.json");
        const json::Node node = json::Node(doc).at("sgp");
        std::string msg = "no ConfigError";
        try {
            make_sgp(&node, PeerContext{0, 8, fam("ring", 8), &w, 5});
        } catch (const gossamer::ConfigError& e) {
            msg = e.what();
        }
        CHECK(msg.find(c.expect) == 0);
    }
    json::Document doc = json::parse_text(R"({"staleness": 4})", "p");
    json::Node node(doc);
    auto p = make_sgp(&node, PeerContext{0, 8, fam("ring", 8), &w, 5});
    CHECK(dynamic_cast<Sgp&>(*p).options().staleness == 4);
    CHECK(dynamic_cast<Sgp&>(*make_sgp(nullptr, PeerContext{0, 8, fam("ring", 8), &w, 5}))
              .options()
              .staleness == 1);
}
