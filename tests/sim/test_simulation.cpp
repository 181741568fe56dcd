// The simulator end to end in math mode: the gossip protocols against the all-reduce baseline.
#include <doctest/doctest.h>

#include <cmath>

#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/sim/simulation.hpp"
#include "gossamer/topology/schedule.hpp"

using namespace gossamer;

namespace {

// Logistic regression on a synthetic set, the same hyperparameters for every algorithm.
optim::TrainingConfig logreg_config() {
    return optim::parse_training_config(json::parse_text(R"({"seed": 2,
        "data": {"name": "logreg_synthetic", "samples": 3200, "test_samples": 800, "features": 10, "seed": 4},
        "model": {"name": "softmax"}, "optimizer": {"name": "sgd", "lr": 0.2},
        "schedule": {"schedule": "cosine"}, "training": {"epochs": 20, "batch_size": 25}})",
                                                         "logreg.json"));
}

sim::SimResult run(const std::string& algorithm, int n, const optim::TrainingConfig& cfg,
                   const optim::TrainingData& data) {
    topology::FamilySpec fam;
    fam.family = algorithm == "sgp" ? "one_peer_exponential" : "exponential";
    fam.n = n;
    fam.weights =
        algorithm == "sgp" ? topology::WeightRule::push_sum : topology::WeightRule::uniform;
    const auto cluster = homogeneous_cluster(n, 0.01, 1e-5, 1e9);
    sim::SimSetup s;
    s.algorithm = algorithm;
    s.topology = topology::generate(fam);
    s.cluster = &cluster;
    s.config = &cfg;
    s.train = &data.train;
    s.test = &data.test;
    s.epochs = cfg.epochs;
    s.eval_interval = 1.0;
    return sim::simulate(s);
}

}  // namespace

TEST_CASE("dpsgd and sgp reach the all-reduce final loss within 1% with 8 and 16 peers") {
    const auto cfg = logreg_config();
    const auto data = optim::load_training_data(cfg);
    for (int n : {8, 16}) {
        CAPTURE(n);
        const double reference = run("allreduce", n, cfg, data).evals.back().loss;
        for (const char* algo : {"dpsgd", "sgp"}) {
            CAPTURE(algo);
            const auto r = run(algo, n, cfg, data);
            const double loss = r.evals.back().loss;
            CAPTURE(loss);
            CAPTURE(reference);
            CHECK(std::abs(loss / reference - 1) < 0.01);
            CHECK(r.peers.size() == static_cast<std::size_t>(n));
            if (std::string(algo) == "sgp") CHECK(r.mass == doctest::Approx(n));
        }
    }
}

TEST_CASE("the simulator reports idle time, steps and bytes per peer") {
    const auto cfg = logreg_config();
    const auto data = optim::load_training_data(cfg);
    const auto r = run("dpsgd", 8, cfg, data);
    for (const auto& p : r.peers) {
        CHECK(p.steps == 20 * (3200 / 8 / 25));
        CHECK(p.busy == doctest::Approx(p.steps * 0.01));
        CHECK(p.bytes_sent > 0);
        CHECK(p.idle_share >= 0);
        CHECK(p.idle_share < 0.5);
    }
    CHECK(r.events > 0);
    CHECK(r.evals.size() > 2);
}
