#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <map>
#include <string>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocols/dpsgd/dpsgd.hpp"
#include "gossamer/topology/analysis.hpp"
#include "gossamer/topology/schedule.hpp"
#include "optimizers/harness/network.hpp"

using namespace gossamer::testing;
using gossamer::proto::CostOnlyWorker;
using gossamer::proto::Dpsgd;
using gossamer::proto::make_dpsgd;
using gossamer::proto::MessageKind;
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

// n dpsgd peers with zero-gradient workers starting at random points of dimension d.
Network consensus(std::shared_ptr<const topo::Schedule> s, std::int64_t steps,
                  const std::string& options = "{}", std::size_t d = 6) {
    json::Document doc = json::parse_text(options, "proto.json");
    json::Node node(doc);
    return make_network(s, steps, make_dpsgd, &node, [d](int i) {
        return std::make_unique<QuadraticWorker>(random_vector(d, 100 + static_cast<unsigned>(i)));
    });
}

HarnessOptions jittery(std::uint64_t seed = 1) {
    HarnessOptions o = seconds_clock();
    o.step_jitter = 0.7;
    o.delay_jitter = 1.5;
    o.seed = seed;
    return o;
}

void check_replicas_match(const Network& net) {
    for (int i = 0; i < net.n(); ++i)
        for (int j = 0; j < net.n(); ++j) {
            const auto* out = net.at<Dpsgd>(i).out_edge(j);
            if (!out) continue;
            CAPTURE(i);
            CAPTURE(j);
            const auto* in = net.at<Dpsgd>(j).in_edge(i);
            REQUIRE(in);
            CHECK(in->next_seq() == out->next_seq());
            const auto a = out->replica(), b = in->replica();
            CHECK(std::equal(a.begin(), a.end(), b.begin(), b.end()));  // bit-identical
        }
}

}  // namespace

TEST_CASE("consensus-only dpsgd keeps the network average under doubly-stochastic W") {
    for (const char* mode : {"atc", "cta"})
        for (const char* fam : {"ring", "exponential", "one_peer_exponential", "random_matching"}) {
            CAPTURE(mode);
            CAPTURE(fam);
            Network net = consensus(family(fam, 8), 60, fmt::format(R"({{"mode": "{}"}})", mode));
            const auto before = net.models();
            auto h = net.harness(jittery());
            REQUIRE(h.run());
            const auto after = net.models();
            CHECK(max_abs_diff(mean_of(after), mean_of(before)) < 2e-6);
            CHECK(disagreement(after) < 1e-3 * disagreement(before));
            for (int i = 0; i < 8; ++i) CHECK(net.at<Dpsgd>(i).stats().rounds == 60);
        }
}

TEST_CASE("dpsgd consensus on a ring and a torus shrinks disagreement at the rate of the SLEM") {
    // Closed forms with uniform weights: ring 8: 1/3 + 2/3 cos(2 pi / 8) = 0.8047; torus 4 x 4
    // (W = (I + A) / 5, adjacency eigenvalues 2 cos(2 pi a / 4) + 2 cos(2 pi b / 4)): 0.6.
    const std::pair<const char*, std::pair<int, double>> cases[] = {
        {"ring", {8, 1.0 / 3 + 2.0 / 3 * std::cos(2 * M_PI / 8)}}, {"torus", {16, 0.6}}};
    for (const auto& [name, spec] : cases) {
        CAPTURE(name);
        const auto graph = family(name, spec.first);
        const auto report = topo::analyse(*graph);
        REQUIRE(report.rate_per_round);
        const double slem = *report.rate_per_round;
        CHECK(slem == doctest::Approx(spec.second));
        for (const char* mode : {"atc", "cta"}) {
            CAPTURE(mode);
            const std::string options = fmt::format(R"({{"mode": "{}"}})", mode);
            auto after = [&](std::int64_t rounds) {
                Network net = consensus(graph, rounds, options, 16);
                REQUIRE(net.harness(jittery(rounds)).run());
                return disagreement(net.models());
            };
            const double d10 = after(10), d40 = after(40);
            const double rate = std::pow(d40 / d10, 1.0 / 30);
            CAPTURE(rate);
            CHECK(std::abs(rate / slem - 1) < 0.2);
            // The gap 1 - rate too, which tells apart e.g. mixing twice per round.
            CHECK(std::abs((1 - rate) / (1 - slem) - 1) < 0.2);
        }
    }
}

TEST_CASE("with quadratic gradients dpsgd's average converges to the minimiser of the sum") {
    // f_i = |x - b_i|^2 / 2: at the fixed point, doubly-stochastic W forces mean(x) = mean(b).
    for (const char* mode : {"atc", "cta"}) {
        CAPTURE(mode);
        json::Document doc = json::parse_text(fmt::format(R"({{"mode": "{}"}})", mode), "p");
        json::Node node(doc);
        Network net = make_network(family("exponential", 8), 300, make_dpsgd, &node, [](int i) {
            const auto u = static_cast<unsigned>(i);
            return std::make_unique<QuadraticWorker>(random_vector(4, u), 1.0,
                                                     random_vector(4, 50 + u), 0.1);
        });
        std::vector<std::vector<double>> targets;
        for (const auto& w : net.workers) {
            const auto& b = dynamic_cast<QuadraticWorker&>(*w).target();
            targets.emplace_back(b.begin(), b.end());
        }
        REQUIRE(net.harness(jittery()).run());
        const auto x = net.models();
        CHECK(max_abs_diff(mean_of(x), mean_of(targets)) < 1e-5);
        // Each peer sits near the minimiser, off it by O(lr) because the b_i differ.
        for (const auto& xi : x) CHECK(max_abs_diff(xi, mean_of(targets)) < 0.5);
        CHECK(disagreement(x) > 1e-4);
    }
}

TEST_CASE("edges carry consecutive sequence numbers and both replicas stay bit-identical") {
    // One-peer exponential on 8 peers: three edges out and three in per peer, each used every
    // third round, so every edge keeps its replica across rounds in which it is idle.
    for (const char* mode : {"atc", "cta"}) {
        CAPTURE(mode);
        Network net = consensus(family("one_peer_exponential", 8), 40,
                                fmt::format(R"({{"mode": "{}", "resync_timeout": 100}})", mode));
        auto h = net.harness(jittery(7));
        std::map<std::pair<int, int>, std::vector<Message>> log;
        h.on_send = [&](const Message& m) { log[{m.sender, m.receiver}].push_back(m); };
        REQUIRE(h.run());
        CHECK(log.size() == 24);
        for (const auto& [edge, msgs] : log) {
            CAPTURE(edge.first);
            CAPTURE(edge.second);
            for (std::size_t s = 0; s < msgs.size(); ++s) {
                CHECK(msgs[s].edge_seq == s);
                CHECK(msgs[s].kind ==
                      (s == 0 ? MessageKind::full_model : MessageKind::model_delta));
                CHECK(msgs[s].elements == 6);
                if (s > 0) CHECK(msgs[s].round == msgs[s - 1].round + 3);
            }
        }
        check_replicas_match(net);
        for (int i = 0; i < 8; ++i) {
            int out = 0, in = 0;
            for (int j = 0; j < 8; ++j) {
                out += net.at<Dpsgd>(i).out_edge(j) != nullptr;
                in += net.at<Dpsgd>(i).in_edge(j) != nullptr;
            }
            CHECK(out == 3);
            CHECK(in == 3);
        }
    }
}

TEST_CASE("a message held back behind later ones is buffered until the gap fills") {
    // Results of synchronous dpsgd do not depend on timing: the reordered run must match.
    const auto ring = family("ring", 6);
    Network base = consensus(ring, 20, R"({"resync_timeout": 100})");
    REQUIRE(base.harness().run());
    Network net = consensus(ring, 20, R"({"resync_timeout": 100})");
    auto h = net.harness();
    h.hold = [](const Message& m) {
        return m.sender == 1 && m.receiver == 2 && m.round == 5 ? 2.5 : 0.0;
    };
    REQUIRE(h.run());
    const auto& edge = *net.at<Dpsgd>(2).in_edge(1);
    CHECK(edge.gaps() == 1);
    CHECK(edge.resyncs() == 0);
    CHECK(net.at<Dpsgd>(2).resync_requests() == 0);
    CHECK(net.models() == base.models());
    check_replicas_match(net);
}

TEST_CASE("a slow message still in flight is asked for but not sent again") {
    // docs/operations/lab.md, uneven8: behind a 100 Mbit/s link a model posted resync_timeout ago
    // was often still being sent, and answering the ask with another full model queued more behind
    // it (2.5x the bytes). Now only a send that completed a timeout ago is answered.
    const auto ring = family("ring", 6);
    Network base = consensus(ring, 20, R"({"resync_timeout": 100})");
    REQUIRE(base.harness().run());
    Network net = consensus(ring, 20, R"({"resync_timeout": 1})");
    auto h = net.harness();
    h.hold = [](const Message& m) {
        return m.sender == 1 && m.receiver == 2 && m.round == 5 ? 4.0 : 0.0;
    };
    REQUIRE(h.run());
    CHECK(net.at<Dpsgd>(2).resync_requests() >= 2);  // asked every second while it waited
    CHECK(net.at<Dpsgd>(1).resync_answers() == 0);
    CHECK(net.at<Dpsgd>(2).in_edge(1)->resyncs() == 0);
    CHECK(net.models() == base.models());  // nothing was re-sent: the same run
    check_replicas_match(net);
}

TEST_CASE("a lost message is detected and the replica re-synchronised with a full model") {
    SUBCASE("ring: the next message on the edge opens a gap") {
        // The ask leaves after round 6's delta arrived (1.1 s after round 5's was lost).
        Network net = consensus(family("ring", 6), 30, R"({"resync_timeout": 1.5})");
        const auto before = net.models();
        auto h = net.harness();
        h.drop = [](const Message& m) {
            return m.kind == MessageKind::model_delta && m.sender == 1 && m.receiver == 2 &&
                   m.round == 5;
        };
        REQUIRE(h.run());
        CHECK(h.dropped() == 1);
        const auto& edge = *net.at<Dpsgd>(2).in_edge(1);
        CHECK(edge.gaps() == 1);
        CHECK(edge.resyncs() == 1);
        CHECK(edge.stale() == 1);  // round 6's delta, which the full model already covered
        CHECK(net.at<Dpsgd>(2).resync_requests() >= 1);
        CHECK(net.at<Dpsgd>(1).resync_answers() == 1);
        check_replicas_match(net);
        CHECK(disagreement(net.models()) < 0.01 * disagreement(before));
    }
    SUBCASE("one-peer exponential: no later message comes, the wait times out") {
        Network net = consensus(family("one_peer_exponential", 8), 30, R"({"resync_timeout": 2})");
        auto h = net.harness();
        // Round 3 uses hop 1 again: 0 -> 1 carries a delta (sequence number 1).
        h.drop = [](const Message& m) {
            return m.kind == MessageKind::model_delta && m.sender == 0 && m.receiver == 1 &&
                   m.round == 3;
        };
        REQUIRE(h.run());
        const auto& edge = *net.at<Dpsgd>(1).in_edge(0);
        CHECK(edge.gaps() == 0);
        CHECK(edge.resyncs() == 1);
        CHECK(net.at<Dpsgd>(1).resync_requests() >= 1);
        CHECK(net.at<Dpsgd>(0).resync_answers() == 1);
        check_replicas_match(net);
    }
}

TEST_CASE("a failed neighbour's weight moves to the peer's own weight") {
    Network net = consensus(family("ring", 5), 120);
    auto h = net.harness();
    h.kill(2, 10.5);
    int late_sends_to_dead = 0;
    h.on_send = [&](const Message& m) { late_sends_to_dead += m.receiver == 2 && h.now() > 10.6; };
    REQUIRE(h.run());
    CHECK(late_sends_to_dead == 0);
    CHECK(net.at<Dpsgd>(2).round() < 120);
    const auto& p1 = net.at<Dpsgd>(1);
    CHECK(p1.round() == 120);
    CHECK(p1.last_self_weight() == doctest::Approx(2.0 / 3));
    REQUIRE(p1.last_weights().size() == 1);
    CHECK(p1.last_weights()[0].first == 0);
    CHECK(p1.last_weights()[0].second == doctest::Approx(1.0 / 3));
    CHECK(net.at<Dpsgd>(3).last_self_weight() == doctest::Approx(2.0 / 3));
    CHECK(net.at<Dpsgd>(0).last_self_weight() == doctest::Approx(1.0 / 3));
    // The survivors, a path 3 - 4 - 0 - 1, still agree.
    CHECK(disagreement(net.models({true, true, false, true, true})) < 1e-3);
}

TEST_CASE("cost-only dpsgd sends full-size messages without values") {
    const auto ring = family("ring", 4);
    Network net = make_network(ring, 5, make_dpsgd, nullptr,
                               [](int) { return std::make_unique<CostOnlyWorker>(1000); });
    Harness h = net.harness();
    int sent = 0;
    h.on_send = [&](const Message& m) {
        ++sent;
        CHECK(m.elements == 1000);
        CHECK(m.payload.empty());
    };
    REQUIRE(h.run());
    CHECK(sent == 4 * 2 * 5);
    for (const auto& p : net.peers) {
        CHECK(p->stats().messages_sent == 10);
        CHECK(p->stats().bytes_sent == 10 * (gossamer::transport::kHeaderBytes + 4000));
    }
}

TEST_CASE("dpsgd refuses push-sum weights, a topology of another size and bad options") {
    QuadraticWorker w({0.0f});
    PeerContext ctx{0, 8, family("exponential", 8, topo::WeightRule::push_sum), &w, 10};
    CHECK_THROWS_WITH_AS(make_dpsgd(nullptr, ctx),
                         doctest::Contains("dpsgd needs averaging weights"),
                         gossamer::TopologyError);
    PeerContext wrong{0, 4, family("ring", 8), &w, 10};
    CHECK_THROWS_AS(make_dpsgd(nullptr, wrong), gossamer::Error);

    struct Case {
        const char* text;
        const char* expect;
    };
    const Case cases[] = {
        {R"({"mode": "atx"})", "proto.json: dpsgd.mode: unknown value \"atx\""},
        {R"({"mod": "atc"})", "proto.json: dpsgd.mod: unknown key \"mod\"; did you mean \"mode\"?"},
        {R"({"resync_timeout": 0})",
         "proto.json: dpsgd.resync_timeout: resync_timeout 0 must be > 0 seconds"},
        {R"({"resync_timeout": "1s"})", "proto.json: dpsgd.resync_timeout: expected a number"},
        {R"(["atc"])", "proto.json: dpsgd: expected an object"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.text);
        json::Document doc =
            json::parse_text(std::string("{\"dpsgd\": ") + c.text + "}", "proto.json");
        const json::Node node = json::Node(doc).at("dpsgd");
        PeerContext ok{0, 8, family("ring", 8), &w, 10};
        std::string msg = "no ConfigError";
        try {
            make_dpsgd(&node, ok);
        } catch (const gossamer::ConfigError& e) {
            msg = e.what();
        }
        CHECK(msg.find(c.expect) == 0);
    }
}

TEST_CASE("dpsgd with max_steps 0 is done at start and sends nothing") {
    QuadraticWorker w({1.0f});
    Dpsgd p(PeerContext{0, 2, family("ring", 2), &w, 0}, {});
    gossamer::proto::Actions out;
    p.start(0.0, out);
    CHECK(out.done);
    CHECK(out.sends.empty());
    CHECK_FALSE(out.start_step);
}

TEST_CASE(
    "dpsgd reweight: a late neighbour is mixed stale with W_ij decay^s, rows still sum to 1") {
    // Peer 2's messages take 3.5 time units longer (a straggler's link); the others step every 1.
    auto run = [](const std::string& options, double& end, std::int64_t& stale) {
        Network net = consensus(family("ring", 5), 40, options);
        auto h = net.harness();
        h.hold = [](const Message& m) { return m.sender == 2 ? 3.5 : 0.0; };
        double worst_row = 0;
        h.after_event = [&] {
            for (int i = 0; i < 5; ++i) {
                const auto& p = net.at<Dpsgd>(i);
                double row = p.last_self_weight();
                for (const auto& [j, w] : p.last_weights()) row += w;
                worst_row = std::max(worst_row, std::abs(row - 1.0));
            }
        };
        REQUIRE(h.run());
        CHECK(worst_row < 1e-12);
        end = h.now();
        stale = net.at<Dpsgd>(1).stale_mixes() + net.at<Dpsgd>(3).stale_mixes();
        return net.at<Dpsgd>(1).edge_metrics();
    };
    double end_wait = 0, end_rw = 0;
    std::int64_t stale_wait = 0, stale_rw = 0;
    const auto none = run("{}", end_wait, stale_wait);
    const auto edges = run(R"({"reweight": {"wait": 0.25, "decay": 0.5}})", end_rw, stale_rw);
    // Without reweight it always waits: every mix fresh, the topology's weights (1/3 on a ring).
    REQUIRE(none.is_array());
    CHECK(none.size() == 2);
    for (const auto& e : none) {
        CHECK(e["staleness_mean"].get<double>() == 0);
        CHECK(e["stale"].get<std::int64_t>() == 0);
        CHECK(e["mixes"].get<std::int64_t>() > 0);
        CHECK(e["weight"].get<double>() == doctest::Approx(1.0 / 3));
    }
    CHECK(stale_wait == 0);
    CHECK(stale_rw > 20);
    CHECK(end_rw < end_wait);  // nobody waits the extra 3.5 every round
    REQUIRE(edges.is_array());
    bool saw_stale = false;
    for (const auto& e : edges) {
        if (e["peer"] != 2) continue;
        const auto s = e["staleness"].get<std::int64_t>();
        CHECK(e["stale"].get<std::int64_t>() > 0);
        CHECK(e["staleness_mean"].get<double>() > 0);
        CHECK(e["weight"].get<double>() == doctest::Approx(std::pow(0.5, double(s)) / 3));
        saw_stale = true;
    }
    CHECK(saw_stale);
}

TEST_CASE("dpsgd reweight options are checked") {
    QuadraticWorker w({0.0f});
    for (const auto& [text, expect] : std::map<std::string, std::string>{
             {R"({"reweight": {"wait": 0}})",
              "proto.json: dpsgd.reweight.wait: wait 0 must be > 0 seconds"},
             {R"({"reweight": {"decay": 1.5}})",
              "proto.json: dpsgd.reweight.decay: decay 1.5 must be in (0, 1]"},
             {R"({"reweight": {"deacy": 0.5}})",
              "proto.json: dpsgd.reweight.deacy: unknown key \"deacy\""},
         }) {
        CAPTURE(text);
        json::Document doc = json::parse_text("{\"dpsgd\": " + text + "}", "proto.json");
        const json::Node node = json::Node(doc).at("dpsgd");
        PeerContext ok{0, 8, family("ring", 8), &w, 10};
        std::string msg = "no ConfigError";
        try {
            make_dpsgd(&node, ok);
        } catch (const gossamer::ConfigError& e) {
            msg = e.what();
        }
        CHECK(msg.find(expect) == 0);
    }
}
