// A peer entering a running job after the others finished training (docs/operations/elastic.md,
// "Entering as the job ends"): no sponsor answers, so it gives up after
// DriverOptions::entry_timeout instead of holding the others' exact average until its stall
// timeout.
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <thread>

#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/optimizers/local/training_worker.hpp"
#include "gossamer/optimizers/protocol/registry.hpp"
#include "peers.hpp"

using namespace peer_test;

TEST_CASE("an entering peer that no member admits gives up after its entry timeout") {
    const auto cfg = optim::parse_training_config(json::parse_text(R"({"seed": 3,
        "data": {"name": "logreg_synthetic", "samples": 800, "test_samples": 200, "features": 10, "seed": 5},
        "model": {"name": "softmax"}, "optimizer": {"name": "sgd", "lr": 0.2},
        "training": {"epochs": 1, "batch_size": 25}})",
                                                                   "entry.json"));
    const auto data = optim::load_training_data(cfg);
    const int n = 4;
    const auto topo = family("exponential", n, topology::WeightRule::uniform);
    std::vector<optim::TrainingWorker> workers;
    std::vector<std::unique_ptr<proto::Protocol>> protocols;
    std::vector<proto::Protocol*> ps;
    std::vector<proto::LocalWorker*> ws;
    for (int r = 0; r < n; ++r) {
        workers.push_back(optim::make_training_worker(cfg, data.train, r, n, cfg.epochs));
        proto::PeerContext ctx{r, n, topo, workers.back().trainer.get(), workers.back().steps};
        protocols.push_back(proto::make_protocol("async", nullptr, ctx));
    }
    for (int r = 0; r < n; ++r) {
        ps.push_back(protocols[static_cast<std::size_t>(r)].get());
        ws.push_back(workers[static_cast<std::size_t>(r)].trainer.get());
    }
    const auto outcomes = run_peers(ps, ws, [&](int r) {
        peer::DriverOptions o;
        o.run_timeout = peer::Millis(30'000);
        o.settle = false;
        if (r == 3) {
            // Rank 3 comes when the others' 8 steps of at most a few ms are long done.
            std::this_thread::sleep_for(std::chrono::seconds(2));
            o.enter = proto::Entry::fresh;
            o.entry_timeout = peer::Millis(1000);
        } else {
            o.absent = {3};
        }
        return o;
    });
    for (int r = 0; r < 3; ++r) {
        CAPTURE(r);
        CHECK(outcomes[static_cast<std::size_t>(r)].error == "");
    }
    const auto& joiner = outcomes[3];
    CAPTURE(joiner.error);
    CHECK_FALSE(joiner.result);
    CHECK(joiner.error.find("no member admitted this peer within 1.0 s of its entry") !=
          std::string::npos);
    CHECK(joiner.seconds < 10);  // its entry timeout, not the run or stall timeout
}
