// async end to end through the simulator: with one peer four times slower, the others finish
// their steps far sooner than under all-reduce (which waits for the straggler), and it trains.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/sim/simulation.hpp"
#include "gossamer/topology/schedule.hpp"

using namespace gossamer;

namespace {

sim::SimResult run(const std::string& algorithm, const optim::TrainingConfig& cfg,
                   const optim::TrainingData& data, const Cluster& cluster) {
    topology::FamilySpec fam;
    fam.family = "exponential";
    fam.n = 16;
    sim::SimSetup s;
    s.algorithm = algorithm;
    s.topology = topology::generate(fam);
    s.cluster = &cluster;
    s.config = &cfg;
    s.train = &data.train;
    s.test = &data.test;
    s.epochs = cfg.epochs;
    s.eval_interval = 0.5;
    return sim::simulate(s);
}

}  // namespace

TEST_CASE("async on straggler16: fast peers finish far sooner than all-reduce, and it trains") {
    const auto cfg = optim::parse_training_config(json::parse_text(R"({"seed": 2,
        "data": {"name": "logreg_synthetic", "samples": 3200, "test_samples": 800, "features": 10, "seed": 4},
        "model": {"name": "softmax"}, "optimizer": {"name": "sgd", "lr": 0.2},
        "schedule": {"schedule": "cosine"}, "training": {"epochs": 10, "batch_size": 25}})",
                                                                   "logreg.json"));
    const auto data = optim::load_training_data(cfg);
    const auto cluster =
        load_cluster(std::string(GOSSAMER_SOURCE_DIR) + "/examples/clusters/straggler16.json", 16);
    const auto ar = run("allreduce", cfg, data, cluster);
    const auto as = run("async", cfg, data, cluster);
    std::vector<double> finish;
    for (const auto& p : as.peers) {
        CHECK(p.steps == 10 * 8);
        finish.push_back(p.busy + p.idle);
        CHECK(p.idle_share < 0.01);  // wait-free: nobody waits for the straggler
    }
    std::sort(finish.begin(), finish.end());
    CAPTURE(ar.end_time);
    CAPTURE(finish[7]);
    CHECK(finish[14] < 0.35 * ar.end_time);  // every peer but the straggler
    CHECK(as.mass == doctest::Approx(16.0).epsilon(1e-9));
    // It trains: the loss falls, and by a quarter of all-reduce's time it is below all-reduce's.
    CHECK(as.evals.back().loss < 0.8 * as.evals.front().loss);
    auto loss_at = [](const sim::SimResult& r, double t) {
        double l = r.evals.front().loss;
        for (const auto& e : r.evals)
            if (e.time <= t) l = e.loss;
        return l;
    };
    const double t = ar.end_time / 4;
    CAPTURE(loss_at(as, t));
    CAPTURE(loss_at(ar, t));
    CHECK(loss_at(as, t) < loss_at(ar, t));
    CHECK(as.evals.back().loss < 1.1 * ar.evals.back().loss);
}
