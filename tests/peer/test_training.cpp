// Real-time peers train synthetic logistic regression to the loss `gossamer sim` predicts.
#include <doctest/doctest.h>

#include <cmath>

#include "gossamer/optimizers/training_config.hpp"
#include "gossamer/peer/worker_setup.hpp"
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
    const auto cluster = sim::homogeneous_cluster(n, 0.01, 1e-5, 1e9);
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
    std::vector<peer::TrainingWorker> workers;
    std::vector<std::unique_ptr<proto::Protocol>> protocols;
    std::vector<proto::Protocol*> ps;
    std::vector<proto::LocalWorker*> ws;
    const auto topo = topology_for(n);
    for (int r = 0; r < n; ++r) {
        workers.push_back(peer::make_training_worker(cfg, data.train, r, n, cfg.epochs));
        proto::PeerContext ctx{r, n, topo, workers.back().trainer.get(), workers.back().steps};
        protocols.push_back(proto::make_protocol(algorithm, nullptr, ctx));
        ps.push_back(protocols.back().get());
        ws.push_back(workers.back().trainer.get());
    }
    const auto out = run_peers(ps, ws, [](int) {
        peer::DriverOptions o;
        o.run_timeout = peer::Millis(60'000);
        return o;
    });
    for (int r = 0; r < n; ++r) {
        const auto& o = out[static_cast<std::size_t>(r)];
        REQUIRE(o.error == "");
        REQUIRE(o.result);
        CHECK(o.result->steps == workers[static_cast<std::size_t>(r)].steps);
    }
    // The loss of the exact average of the peers' models on the test set, as sim reports it.
    const auto model = optim::build_model(cfg, data.train);
    const std::size_t size = model->parameter_count();
    std::vector<double> mean(size, 0.0);
    std::vector<float> x(size);
    for (const auto* p : ps) {
        p->current_model(x);
        for (std::size_t i = 0; i < size; ++i) mean[i] += x[i] / n;
    }
    for (std::size_t i = 0; i < size; ++i) x[i] = static_cast<float>(mean[i]);
    return model->evaluate(x, data.test, 1000).loss;
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
