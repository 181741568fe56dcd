// Real-time peers train synthetic logistic regression to the loss `gossamer sim` predicts.
#include <doctest/doctest.h>

#include <cmath>

#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/sim/simulation.hpp"
#include "peers.hpp"

using namespace peer_test;

namespace {

optim::TrainingConfig logreg_config() {
    return optim::parse_training_config(json::parse_text(R"({"seed": 2,
        "data": {"name": "logreg_synthetic", "samples": 3200, "test_samples": 800, "features": 10, "seed": 4},
        "model": {"name": "softmax"}, "optimizer": {"name": "sgd", "lr": 0.2},
        "schedule": {"schedule": "cosine"}, "training": {"epochs": 5, "batch_size": 25}})",
                                                         "logreg.json"));
}

std::shared_ptr<const topology::Schedule> topology_for(int n) {
    return family("exponential", n, topology::WeightRule::uniform);
}

double simulated_loss(const std::string& algorithm, int n, const optim::TrainingConfig& cfg,
                      const optim::TrainingData& data) {
    const auto cluster = homogeneous_cluster(n, 0.01, 1e-5, 1e9);
    sim::SimSetup s;
    s.algorithm = algorithm;
    s.topology = topology_for(n);
    s.cluster = &cluster;
    s.config = &cfg;
    s.train = &data.train;
    s.test = &data.test;
    s.epochs = cfg.epochs;
    return sim::simulate(s).evals.back().loss;
}

double real_loss(const std::string& algorithm, int n, const optim::TrainingConfig& cfg,
                 const optim::TrainingData& data) {
    peer::LocalTraining job;
    job.algorithm = algorithm;
    job.topology = topology_for(n);
    job.config = &cfg;
    job.train = &data.train;
    job.test = &data.test;
    job.epochs = cfg.epochs;
    job.options = [](int) {
        peer::DriverOptions o;
        o.run_timeout = peer::Millis(60'000);
        return o;
    };
    const auto res = peer::run_local_training(job);
    const std::int64_t steps = 3200 / n / cfg.batch_size * cfg.epochs;
    for (const auto& o : res.peers) {
        REQUIRE(o.error == "");
        REQUIRE(o.result);
        CHECK(o.result->steps == steps);
    }
    REQUIRE(res.loss);
    CHECK(res.accuracy);
    return *res.loss;
}

}  // namespace

TEST_CASE(
    "allreduce and dpsgd over real-time peers reach the final loss of gossamer sim within 1%") {
    const auto cfg = logreg_config();
    const auto data = optim::load_training_data(cfg);
    const int n = 4;
    for (const std::string algorithm : {"allreduce", "dpsgd"}) {
        CAPTURE(algorithm);
        const double reference = simulated_loss(algorithm, n, cfg, data);
        const double loss = real_loss(algorithm, n, cfg, data);
        CAPTURE(reference);
        CAPTURE(loss);
        CHECK(std::isfinite(loss));
        CHECK(std::abs(loss / reference - 1) < 0.01);
    }
}
