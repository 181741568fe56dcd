#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "gossamer/core/models.hpp"
#include "gossamer/core/sharding.hpp"
#include "gossamer/core/synthetic.hpp"
#include "gossamer/optimizers/local/local_trainer.hpp"
#include "gossamer/optimizers/protocols/choco/choco.hpp"
#include "gossamer/topology/schedule.hpp"
#include "optimizers/harness/network.hpp"

using namespace gossamer::testing;
namespace topo = gossamer::topology;
namespace json = gossamer::json;

namespace {

constexpr int kPeers = 8, kFeatures = 10;

// 8 LocalTrainers (softmax regression, plain SGD) on iid shards of a logistic-regression set,
// each from its own initialisation, running choco with `options` on the exponential graph.
// Returns {loss before, loss after, optimum, disagreement after}.
std::vector<double> train(const std::string& options) {
    const gossamer::SyntheticSet set = gossamer::make_logistic_regression(4000, kFeatures, 11);
    gossamer::ShardSpec spec;
    spec.peers = kPeers;
    spec.seed = 5;
    std::vector<gossamer::Dataset> shards;
    for (int r = 0; r < kPeers; ++r) shards.push_back(gossamer::shard_for_peer(set.data, spec, r));
    gossamer::optim::OptimizerConfig sgd;
    sgd.lr = 0.5;
    const gossamer::optim::LrSchedule constant({}, sgd.lr);
    topo::FamilySpec fam;
    fam.family = "exponential";
    fam.n = kPeers;
    json::Document doc = json::parse_text(options, "choco.json");
    json::Node node(doc);

    Network net =
        make_network(topo::generate(fam), 200, gossamer::proto::make_choco, &node, [&](int r) {
            auto model = gossamer::models::softmax_regression(kFeatures, 2);
            auto layout = model->default_partitions();
            return std::make_unique<gossamer::optim::LocalTrainer>(
                std::move(model), std::move(layout), sgd, constant,
                shards[static_cast<std::size_t>(r)], 32, 1000 + static_cast<std::uint64_t>(r), r);
        });
    auto eval = gossamer::models::softmax_regression(kFeatures, 2);
    auto mean_loss = [&] {
        double s = 0;
        for (const auto& m : net.models()) {
            const std::vector<float> p(m.begin(), m.end());
            s += eval->evaluate(p, set.data).loss / kPeers;
        }
        return s;
    };
    const double before = mean_loss();
    HarnessOptions o = seconds_clock();
    o.step_jitter = 0.5;
    o.delay_jitter = 0.5;
    auto h = net.harness(o);
    REQUIRE(h.run());
    return {before, mean_loss(), gossamer::logistic_optimum(set.data).loss,
            disagreement(net.models())};
}

}  // namespace

TEST_CASE("8 choco peers with compressed messages train softmax regression") {
    for (const char* options :
         {R"({"gamma": 0.5, "compressor": {"name": "fp16"}})",
          R"({"gamma": 0.5, "compressor": {"name": "int8"}})",
          R"({"gamma": 0.3, "compressor": {"name": "topk", "fraction": 0.25}})",
          R"({"gamma": 0.3, "compressor": {"name": "randomk", "fraction": 0.25}})"}) {
        CAPTURE(std::string(options));
        const auto r = train(options);
        CAPTURE(r[0]);
        CAPTURE(r[1]);
        CAPTURE(r[2]);
        CAPTURE(r[3]);
        CHECK(r[1] < r[0] - 0.2);
        CHECK(r[1] < r[2] + 0.03);
        CHECK(r[3] < 1.0);
    }
}
