// choco in the simulator, end to end in math mode, against the all-reduce baseline and dpsgd.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/sim/simulation.hpp"
#include "gossamer/topology/schedule.hpp"

using namespace gossamer;

namespace {

// Logistic regression on a synthetic set (as tests/sim/test_simulation.cpp), with choco's
// options in the config's "algorithms" object.
optim::TrainingConfig config(const std::string& choco) {
    return optim::parse_training_config(json::parse_text(R"({"seed": 2,
        "data": {"name": "logreg_synthetic", "samples": 3200, "test_samples": 800, "features": 10, "seed": 4},
        "model": {"name": "softmax"}, "optimizer": {"name": "sgd", "lr": 0.2},
        "schedule": {"schedule": "cosine"}, "training": {"epochs": 20, "batch_size": 25},
        "algorithms": {"choco": )" + choco + "}}",
                                                         "logreg.json"));
}

sim::SimResult run(const std::string& algorithm, const optim::TrainingConfig& cfg,
                   const optim::TrainingData& data) {
    topology::FamilySpec fam;
    fam.family = "exponential";
    fam.n = 8;
    const auto cluster = homogeneous_cluster(8, 0.01, 1e-5, 1e9);
    sim::SimSetup s;
    s.algorithm = algorithm;
    s.options = cfg.algorithm_options(algorithm);
    s.topology = topology::generate(fam);
    s.cluster = &cluster;
    s.config = &cfg;
    s.train = &data.train;
    s.test = &data.test;
    s.epochs = cfg.epochs;
    s.eval_interval = 1.0;
    return sim::simulate(s);
}

std::uint64_t bytes_per_peer(const sim::SimResult& r) {
    std::uint64_t b = 0;
    for (const auto& p : r.peers) b += p.bytes_sent;
    return b / r.peers.size();
}

}  // namespace

TEST_CASE("choco in the simulator reaches the all-reduce final loss with fewer bytes than dpsgd") {
    for (const char* choco :
         {R"({"compressor": {"name": "fp16"}})",
          R"({"gamma": 0.4, "compressor": {"name": "int8"}})",
          R"({"gamma": 0.3, "compressor": {"name": "topk", "fraction": 0.3}})"}) {
        CAPTURE(std::string(choco));
        const auto cfg = config(choco);
        const auto data = optim::load_training_data(cfg);
        const double reference = run("allreduce", cfg, data).evals.back().loss;
        const auto dpsgd = run("dpsgd", cfg, data);
        const auto r = run("choco", cfg, data);
        const double loss = r.evals.back().loss;
        CAPTURE(loss);
        CAPTURE(reference);
        CHECK(std::abs(loss / reference - 1) < 0.01);
        CHECK(bytes_per_peer(r) < bytes_per_peer(dpsgd));
    }
}
