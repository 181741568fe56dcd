// The one-step-delayed rules of dpsgd atc and choco (docs/algorithms/dpsgd.md, "Delayed mixing"):
// what each computes, checked against the formula on quadratic workers, the ownership rule
// (the harness checks that x and the compute point never change while a step runs), and the
// refusal of bad option values.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocol/registry.hpp"
#include "gossamer/optimizers/protocols/choco/choco.hpp"
#include "gossamer/optimizers/protocols/dpsgd/dpsgd.hpp"
#include "optimizers/harness/network.hpp"

using namespace gossamer;
using gossamer::testing::QuadraticWorker;

namespace {

constexpr int kPeers = 4;
constexpr std::int64_t kSteps = 6;
constexpr std::size_t kDim = 8;
constexpr double kLr = 0.1;

std::shared_ptr<const topology::Schedule> schedule(const char* family) {
    topology::FamilySpec f;
    f.family = family;
    f.n = kPeers;
    f.weights = topology::WeightRule::uniform;
    return topology::generate(f);
}

std::vector<float> start(int r) {
    return gossamer::testing::random_vector(kDim, 40 + static_cast<std::uint64_t>(r));
}
std::vector<float> target(int r) {
    return gossamer::testing::random_vector(kDim, 90 + static_cast<std::uint64_t>(r));
}

gossamer::testing::Network network(const char* algorithm, const char* family, const char* options) {
    const json::Node doc(json::parse_text(options, "options.json"));
    return gossamer::testing::make_network(
        schedule(family), kSteps,
        [algorithm](const json::Node* o, proto::PeerContext c) {
            return proto::make_protocol(algorithm, o, std::move(c));
        },
        &doc,
        [](int r) { return std::make_unique<QuadraticWorker>(start(r), 1.0, target(r), kLr); });
}

using Models = std::vector<std::vector<double>>;

// sum_j W_ij h_j over round t's in-neighbours (W_ii h_i included).
Models mix(const topology::Schedule& s, std::int64_t t, const Models& h) {
    const auto round = s.at(t);
    Models out(h.size(), std::vector<double>(kDim, 0.0));
    for (int i = 0; i < kPeers; ++i) {
        auto& o = out[static_cast<std::size_t>(i)];
        for (std::size_t k = 0; k < kDim; ++k)
            o[k] = round->weights.at(i, i) * h[static_cast<std::size_t>(i)][k];
        for (int j : round->graph.in_neighbors(i))
            for (std::size_t k = 0; k < kDim; ++k)
                o[k] += round->weights.at(i, j) * h[static_cast<std::size_t>(j)][k];
    }
    return out;
}

// x - lr a (at - b) with a = 1, for every peer.
Models step(const Models& x, const Models& at) {
    Models out = x;
    for (int i = 0; i < kPeers; ++i) {
        const auto b = target(i);
        for (std::size_t k = 0; k < kDim; ++k)
            out[static_cast<std::size_t>(i)][k] -=
                kLr * (at[static_cast<std::size_t>(i)][k] - b[k]);
    }
    return out;
}

Models initial() {
    Models h;
    for (int i = 0; i < kPeers; ++i) {
        const auto x = start(i);
        h.emplace_back(x.begin(), x.end());
    }
    return h;
}

void check_close(const Models& got, const Models& want) {
    for (int i = 0; i < kPeers; ++i)
        for (std::size_t k = 0; k < kDim; ++k) {
            CAPTURE(i);
            CAPTURE(k);
            CHECK(got[static_cast<std::size_t>(i)][k] ==
                  doctest::Approx(want[static_cast<std::size_t>(i)][k]).epsilon(1e-5));
        }
}

}  // namespace

TEST_CASE("delayed dpsgd atc computes h_t = sum_j W_ij h_(t-1),j - lr g(h_(t-1))") {
    for (const char* family : {"one_peer_exponential", "ring"}) {
        CAPTURE(family);
        auto net = network("dpsgd", family, R"({"delay": 1})");
        gossamer::testing::HarnessOptions ho = gossamer::testing::seconds_clock();
        ho.step_jitter = 0.5;  // peers out of step: round t arrives while t + 1 is computed
        ho.delay_jitter = 0.7;
        auto h = net.harness(ho);
        REQUIRE(h.run());
        // h_0 = x_0 - lr g(x_0); h_t = sum_j W_ij h_(t-1),j - lr g(h_(t-1)); x = sum_j W_ij
        // h_(T-1),j.
        const auto s = schedule(family);
        Models hv = step(initial(), initial());
        for (std::int64_t t = 1; t < kSteps; ++t) hv = step(mix(*s, t - 1, hv), hv);
        check_close(net.models(), mix(*s, kSteps - 1, hv));
        for (int i = 0; i < kPeers; ++i) {
            CHECK(net.at<proto::Dpsgd>(i).round() == kSteps);
            CHECK(net.peers[static_cast<std::size_t>(i)]->done());
        }
    }
}

TEST_CASE("delayed choco computes x += gamma sum_j W_ij (x_hat_j - x_hat_i) one step late") {
    // topk with fraction 1 sends every value: x_hat is what was sent, so the rule is exact.
    auto net =
        network("choco", "ring",
                R"({"delay": 1, "gamma": 0.5, "compressor": {"name": "topk", "fraction": 1}})");
    gossamer::testing::HarnessOptions ho = gossamer::testing::seconds_clock();
    ho.step_jitter = 0.5;
    ho.delay_jitter = 0.7;
    auto h = net.harness(ho);
    REQUIRE(h.run());
    // h_0 = x_0 - lr g(x_0); m_t = h_(t-1) + gamma sum_j W_ij (h_(t-1),j - h_(t-1),i) (the
    // replicas hold the sent h); h_t = m_t - lr g(h_(t-1)); the final model is m_T.
    const auto s = schedule("ring");
    const double gamma = 0.5;
    auto consensus = [&](std::int64_t t, const Models& hv) {
        Models m = mix(*s, t, hv);  // sum_j W_ij h_j (W_ii h_i included)
        for (std::size_t i = 0; i < m.size(); ++i)
            for (std::size_t k = 0; k < kDim; ++k)
                m[i][k] = hv[i][k] + gamma * (m[i][k] - hv[i][k]);
        return m;
    };
    Models hv = step(initial(), initial());
    for (std::int64_t t = 1; t < kSteps; ++t) hv = step(consensus(t - 1, hv), hv);
    check_close(net.models(), consensus(kSteps - 1, hv));
    for (int i = 0; i < kPeers; ++i) CHECK(net.at<proto::Choco>(i).round() == kSteps);
}

TEST_CASE(
    "delayed rules: one step still ends with its round mixed, and losing a neighbour ends too") {
    SUBCASE("one step") {
        const json::Node doc(json::parse_text(R"({"delay": 1})", "options.json"));
        auto net = gossamer::testing::make_network(
            schedule("ring"), 1,
            [](const json::Node* o, proto::PeerContext c) {
                return proto::make_protocol("dpsgd", o, std::move(c));
            },
            &doc, [](int r) { return std::make_unique<QuadraticWorker>(start(r)); });
        auto h = net.harness();
        REQUIRE(h.run());
        for (int i = 0; i < kPeers; ++i) CHECK(net.at<proto::Dpsgd>(i).round() == 1);
    }
    SUBCASE("a peer dies: the others stop waiting for it and finish") {
        for (const char* algorithm : {"dpsgd", "choco"}) {
            CAPTURE(algorithm);
            auto net = network(algorithm, "ring", R"({"delay": 1})");
            auto h = net.harness();
            h.kill(2, 2.5);
            h.run();
            for (int i = 0; i < kPeers; ++i)
                if (i != 2) CHECK(net.peers[static_cast<std::size_t>(i)]->done());
        }
    }
}

TEST_CASE("delay: bad values are refused naming the option") {
    const auto refused = [](const char* algorithm, const char* options, const char* words) {
        const json::Node doc(json::parse_text(options, "train.json"));
        CAPTURE(options);
        try {
            if (std::string(algorithm) == "dpsgd")
                (void)proto::parse_dpsgd_options(&doc);
            else
                (void)proto::parse_choco_options(&doc);
            FAIL("accepted");
        } catch (const ConfigError& e) {
            const std::string what = e.what();
            CAPTURE(what);
            CHECK(what.find("delay") != std::string::npos);
            CHECK(what.find(words) != std::string::npos);
            CHECK(what.find('\n') == std::string::npos);
        }
    };
    refused("dpsgd", R"({"delay": 2})", "delay");
    refused("dpsgd", R"({"delay": -1})", "delay");
    refused("dpsgd", R"({"delay": "one"})", "delay");
    refused("dpsgd", R"({"mode": "cta", "delay": 1})", "cta");
    refused("dpsgd", R"({"delay": 1, "reweight": {}})", "reweight");
    refused("choco", R"({"delay": 1.5})", "delay");
    refused("choco", R"({"delay": 7})", "delay");
    // delay 0 is the plain rule.
    const json::Node zero(json::parse_text(R"({"delay": 0, "mode": "cta"})", "train.json"));
    CHECK(proto::parse_dpsgd_options(&zero).delay == 0);
}
