#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "gossamer/core/models.hpp"
#include "gossamer/core/sharding.hpp"
#include "gossamer/core/synthetic.hpp"
#include "gossamer/optimizers/local/local_trainer.hpp"
#include "gossamer/optimizers/protocols/dpsgd/dpsgd.hpp"
#include "gossamer/optimizers/protocols/sgp/sgp.hpp"
#include "gossamer/topology/schedule.hpp"
#include "optimizers/harness/network.hpp"

using namespace gossamer::testing;
namespace topo = gossamer::topology;

namespace {

constexpr int kPeers = 8, kFeatures = 10;

struct Run {
    double before = 0, after = 0;  // mean over peers of the loss on the whole set
    double optimum = 0;
    double spread = 0;  // disagreement of the final models
};

// 8 LocalTrainers (softmax regression, plain SGD) on iid shards of a logistic-regression set,
// each starting from its own initialisation, driven by `factory` over `schedule`.
Run train(const Factory& factory, std::shared_ptr<const topo::Schedule> schedule) {
    const gossamer::SyntheticSet set = gossamer::make_logistic_regression(4000, kFeatures, 11);
    gossamer::ShardSpec spec;
    spec.peers = kPeers;
    spec.seed = 5;
    std::vector<gossamer::Dataset> shards;
    for (int r = 0; r < kPeers; ++r) shards.push_back(gossamer::shard_for_peer(set.data, spec, r));
    gossamer::optim::OptimizerConfig sgd;
    sgd.lr = 0.5;
    const gossamer::optim::LrSchedule constant({}, sgd.lr);

    Network net = make_network(schedule, 150, factory, nullptr, [&](int r) {
        auto model = gossamer::models::softmax_regression(kFeatures, 2);
        auto layout = model->default_partitions();
        return std::make_unique<gossamer::optim::LocalTrainer>(
            std::move(model), std::move(layout), sgd, constant, shards[static_cast<std::size_t>(r)],
            32, 1000 + static_cast<std::uint64_t>(r), r);
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
    Run run;
    run.before = mean_loss();
    HarnessOptions o = seconds_clock();
    o.step_jitter = 0.5;
    o.delay_jitter = 0.5;
    auto h = net.harness(o);
    REQUIRE(h.run());
    run.after = mean_loss();
    run.optimum = gossamer::logistic_optimum(set.data).loss;
    run.spread = disagreement(net.models());
    return run;
}

std::shared_ptr<const topo::Schedule> family(const char* name, topo::WeightRule rule) {
    topo::FamilySpec spec;
    spec.family = name;
    spec.n = kPeers;
    spec.weights = rule;
    return topo::generate(spec);
}

}  // namespace

TEST_CASE("8 dpsgd peers on the exponential graph train softmax regression") {
    const Run r =
        train(gossamer::proto::make_dpsgd, family("exponential", topo::WeightRule::uniform));
    CAPTURE(r.before);
    CAPTURE(r.after);
    CAPTURE(r.optimum);
    CHECK(r.after < r.before - 0.2);
    CHECK(r.after < r.optimum + 0.03);
    CAPTURE(r.spread);
    CHECK(r.spread < 1.0);
}

TEST_CASE("8 sgp peers on the one-peer exponential graph train softmax regression") {
    const Run r = train(gossamer::proto::make_sgp,
                        family("one_peer_exponential", topo::WeightRule::push_sum));
    CAPTURE(r.before);
    CAPTURE(r.after);
    CAPTURE(r.optimum);
    CHECK(r.after < r.before - 0.2);
    CHECK(r.after < r.optimum + 0.03);
    CAPTURE(r.spread);
    CHECK(r.spread < 1.0);
}
