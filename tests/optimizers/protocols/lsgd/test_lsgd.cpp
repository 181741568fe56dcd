// lsgd: the leader is the best in-neighbour, the pull is x - lambda (x - x_leader).
#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocols/lsgd/lsgd.hpp"
#include "gossamer/topology/schedule.hpp"
#include "optimizers/harness/network.hpp"

using namespace gossamer::testing;
namespace topo = gossamer::topology;
namespace json = gossamer::json;
namespace proto = gossamer::proto;

namespace {

std::shared_ptr<const topo::Schedule> family(const char* name, int n) {
    topo::FamilySpec f;
    f.family = name;
    f.n = n;
    return topo::generate(f);
}

}  // namespace

TEST_CASE("lsgd: one round pulls every peer towards its best in-neighbour") {
    // Peer r starts at x = r + 1 with f = 1/2 x^2: the loss grows with the rank, so on a
    // complete graph rank 0 leads everyone; with lr 0.1 and pull 0.5:
    //   x_half = 0.9 x;  leader 0: x_half = 0.9;  x_r <- x_half - 0.5 (x_half - 0.9).
    const int n = 4;
    json::Document doc = json::parse_text(R"({"pull": 0.5, "smoothing": 0})", "lsgd.json");
    json::Node node(doc);
    Network net = make_network(family("complete", n), 1, proto::make_lsgd, &node, [&](int r) {
        return std::make_unique<QuadraticWorker>(std::vector<float>{static_cast<float>(r + 1)}, 1.0,
                                                 std::vector<float>{0.0f}, 0.1);
    });
    auto h = net.harness();
    REQUIRE(h.run());
    const auto models = net.models();
    for (int r = 0; r < n; ++r) {
        CAPTURE(r);
        const float half = static_cast<float>(r + 1) - 0.1f * static_cast<float>(r + 1);
        const float lead = 1.0f - 0.1f * 1.0f;
        const float want = r == 0 ? half : half - 0.5f * (half - lead);
        CHECK(models[static_cast<std::size_t>(r)][0] == want);
        CHECK(net.at<proto::Lsgd>(r).leader() == 0);
        CHECK(net.at<proto::Lsgd>(r).pulls() == (r == 0 ? 0 : 1));
    }
}

TEST_CASE("lsgd: a leader among in-neighbours only, and a period between pulls") {
    // Directed ring: peer r hears only from r - 1; peer 0 (loss of rank 3's x) is led by 3.
    const int n = 4;
    json::Document doc = json::parse_text(R"({"pull": 0.25, "period": 3})", "lsgd.json");
    json::Node node(doc);
    topo::FamilySpec f;
    f.family = "one_peer_exponential";
    f.n = n;
    auto sched = topo::generate(f);
    Network net = make_network(sched, 9, proto::make_lsgd, &node, [&](int r) {
        return std::make_unique<QuadraticWorker>(std::vector<float>{static_cast<float>(r + 1)}, 1.0,
                                                 std::vector<float>{0.0f}, 0.1);
    });
    auto h = net.harness();
    REQUIRE(h.run());
    for (int r = 0; r < n; ++r) {
        CAPTURE(r);
        // 9 steps, a pull after steps 3, 6, 9: 3 messages per peer.
        CHECK(net.peers[static_cast<std::size_t>(r)]->stats().messages_sent == 3);
        CHECK(net.peers[static_cast<std::size_t>(r)]->stats().rounds == 3);
        const int leader = net.at<proto::Lsgd>(r).leader();
        CHECK(leader >= 0);
        CHECK(leader < n);
    }
    // Rank 0 is the best everywhere it is heard: whoever hears it last is led by it.
    const int hears0 = sched->at(8)->graph.out_neighbors(0)[0];
    CHECK(net.at<proto::Lsgd>(hears0).leader() == 0);
}

TEST_CASE("lsgd: bad options are refused with the option's path") {
    QuadraticWorker w({0.0f});
    for (const char* bad : {R"({"pull": 0})", R"({"pull": 1.5})", R"({"period": 0})",
                            R"({"smoothing": 1})", R"({"leader": "x"})"}) {
        CAPTURE(std::string(bad));
        json::Document doc = json::parse_text(bad, "lsgd.json");
        json::Node node(doc);
        CHECK_THROWS_AS(proto::make_lsgd(&node, {0, 4, family("ring", 4), &w, 1}),
                        gossamer::ConfigError);
    }
}
