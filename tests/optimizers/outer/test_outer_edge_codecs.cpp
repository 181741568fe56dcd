// choco's per-edge compression (docs/algorithms/compression.md, "Per-edge compression") under
// the outer layer: the link-aware rule measures each edge from the round's full models and
// deltas as it does per step, and picks int4 on the slow edges only.
#include <doctest/doctest.h>

#include <string>

#include "gossamer/core/cluster.hpp"
#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/sim/simulation.hpp"
#include "gossamer/topology/schedule.hpp"

using namespace gossamer;

TEST_CASE("per-edge compression under outer: int4 on the slow edges only, and it trains") {
    const auto cfg = optim::parse_training_config(json::parse_text(R"({"seed": 3,
        "data": {"name": "logreg_synthetic", "samples": 1600, "test_samples": 400, "features": 20,
                 "seed": 5},
        "model": {"name": "mlp", "hidden": [1024]}, "optimizer": {"name": "sgd", "lr": 0.1},
        "training": {"epochs": 8, "batch_size": 20},
        "outer": {"steps": 4, "optimizer": "nesterov", "lr": 0.7, "momentum": 0.9}})",
                                                                   "cfg.json"));
    const auto data = optim::load_training_data(cfg);
    // 1 Gbit/s everywhere but rank 2's links, 1 MB/s (a 94 kB full model: 0.09 s).
    auto cluster = homogeneous_cluster(8, 0.02, 1e-4, 1.25e8);
    cluster.peers[2].uplink = cluster.peers[2].downlink = 1e6;
    topology::FamilySpec f;
    f.family = "ring";
    f.n = 8;
    f.weights = topology::WeightRule::metropolis_hastings;
    const auto ring = topology::generate(f);
    sim::SimSetup s;
    s.algorithm = "choco";
    s.options = json::Node(json::parse_text(
        R"({"gamma": 0.5, "edge_compression": [{"below": 1e7, "compressor": {"name": "int4"}}]})",
        "choco.json"));
    s.topology = ring;
    s.cluster = &cluster;
    s.config = &cfg;
    s.train = &data.train;
    s.test = &data.test;
    s.epochs = cfg.epochs;
    s.eval_interval = 1.0;
    const auto r = sim::simulate(s);
    for (const auto& p : r.peers) {
        REQUIRE(p.edges.is_array());
        for (const auto& e : p.edges) {
            CAPTURE(p.rank);
            CAPTURE(e.dump());
            const bool slow = p.rank == 2 || e["peer"] == 2;
            const auto& codecs = e["codecs"];
            // 20 rounds: the first full model measures the edge, then int4 or raw deltas.
            CHECK(codecs.value(slow ? "0:int4" : "raw", 0) >= 15);
            CHECK(codecs.value(slow ? "raw" : "0:int4", 0) == 0);
        }
    }
    CAPTURE(r.evals.front().accuracy);
    CAPTURE(r.evals.back().accuracy);
    CHECK(r.evals.back().accuracy > r.evals.front().accuracy + 0.1);
}
