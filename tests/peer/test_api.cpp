// gossamer::Peer over the in-process transport: a user loop with its own plain SGD trains to
// the same loss as the built-in peers, D-PSGD reaches consensus, a slow loop does not stall
// async, and a neighbour that dies under all-reduce ends step() with an error naming it.
#include <doctest/doctest.h>

#include <cmath>

#include "api_peers.hpp"
#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/optimizers/local/training_worker.hpp"
#include "gossamer/peer/local.hpp"

using namespace api_test;

namespace {

optim::TrainingConfig logreg_config() {
    return optim::parse_training_config(json::parse_text(R"({"seed": 2,
        "data": {"name": "logreg_synthetic", "samples": 1600, "test_samples": 400, "features": 10, "seed": 4},
        "model": {"name": "softmax"}, "optimizer": {"name": "sgd", "lr": 0.2},
        "schedule": {"schedule": "cosine"}, "training": {"epochs": 3, "batch_size": 20}})",
                                                         "logreg.json"));
}

// The built-in peers: run_local_training with the same topology, config and seed.
double builtin_loss(const std::string& algorithm, const topology::Topology& topo,
                    const optim::TrainingConfig& cfg, const optim::TrainingData& data) {
    peer::LocalTraining job;
    job.algorithm = algorithm;
    job.topology = topo.schedule;
    job.config = &cfg;
    job.train = &data.train;
    job.test = &data.test;
    job.epochs = cfg.epochs;
    const auto res = peer::run_local_training(job);
    for (const auto& o : res.peers) REQUIRE(o.error == "");
    REQUIRE(res.loss);
    return *res.loss;
}

// The same job as user loops: each owns a copy of the parameters and steps it with the
// trainer's own gradient and SGD (the "user's optimizer"), then calls Peer::step.
double api_loss(const std::string& algorithm, const std::string& topology_path, int n,
                const optim::TrainingConfig& cfg, const optim::TrainingData& data,
                std::vector<LoopOutcome>& out) {
    auto job = make_inproc_job(n);
    out = run_loops(n, [&](int r, LoopOutcome& me) {
        auto w = optim::make_training_worker(cfg, data.train, r, n, cfg.epochs);
        auto& trainer = *w.trainer;
        std::vector<float> p(trainer.params().begin(), trainer.params().end());
        Peer peer(inproc_options(topology_path, r, algorithm.c_str(), w.steps, job), p);
        double loss = 0;
        do {
            loss = trainer.compute_gradient(p);
            trainer.apply_gradient(p, trainer.gradient());
        } while (peer.step(loss));
        me.metrics = peer.finish();
        me.params = p;
    });
    const auto model = optim::build_model(cfg, data.train);
    std::vector<double> mean(model->parameter_count(), 0.0);
    for (const auto& o : out) {
        REQUIRE(o.error == "");
        REQUIRE(o.params.size() == mean.size());
        for (std::size_t k = 0; k < mean.size(); ++k) mean[k] += o.params[k] / n;
    }
    std::vector<float> x(mean.begin(), mean.end());
    return model->evaluate(x, data.test, 1000).loss;
}

}  // namespace

TEST_CASE(
    "a user loop with plain SGD matches the built-in peers within 1e-4 under allreduce and dpsgd") {
    test::TempDir dir;
    const int n = 4;
    const auto path = topology_file(dir, "exponential", n, topology::WeightRule::uniform);
    const auto topo = topology::load_topology(path);
    const auto cfg = logreg_config();
    const auto data = optim::load_training_data(cfg);
    for (const std::string algorithm : {"allreduce", "dpsgd"}) {
        CAPTURE(algorithm);
        const double reference = builtin_loss(algorithm, topo, cfg, data);
        std::vector<LoopOutcome> out;
        const double loss = api_loss(algorithm, path, n, cfg, data, out);
        CAPTURE(reference);
        CAPTURE(loss);
        CHECK(std::isfinite(loss));
        CHECK(loss < 0.9 * std::log(2.0));  // it learned something
        CHECK(std::abs(loss / reference - 1) < 1e-4);
        const std::int64_t steps = 1600 / n / cfg.batch_size * cfg.epochs;
        for (const auto& o : out) {
            CHECK(o.metrics.steps == steps);
            CHECK(o.metrics.finished);
            CHECK(o.metrics.rounds > 0);
            CHECK(o.metrics.bytes_sent > 0);
            CHECK(o.metrics.failed_peers.empty());
        }
        if (algorithm == "allreduce")  // averaged updates from one start: identical models
            for (const auto& o : out) CHECK(o.params == out[0].params);
    }
}

namespace {

// Peer r minimises 0.5 |x - c_r|^2 with its own SGD; c_r differs per peer.
std::vector<float> target(int r, std::size_t size) {
    std::vector<float> c(size);
    for (std::size_t k = 0; k < size; ++k)
        c[k] = static_cast<float>(std::sin(1.0 + static_cast<double>(r * 7 + static_cast<int>(k))));
    return c;
}

void quadratic_step(std::span<float> x, std::span<const float> c, double lr) {
    for (std::size_t k = 0; k < x.size(); ++k) x[k] -= static_cast<float>(lr * (x[k] - c[k]));
}

double spread(const std::vector<LoopOutcome>& out, const std::vector<double>& center) {
    double worst = 0;
    for (const auto& o : out) {
        double d = 0;
        for (std::size_t k = 0; k < center.size(); ++k) d += std::pow(o.params[k] - center[k], 2);
        worst = std::max(worst, std::sqrt(d));
    }
    return worst;
}

}  // namespace

TEST_CASE("dpsgd and sgp and choco: user loops on different objectives reach consensus") {
    const int n = 4;
    const std::size_t size = 16;
    std::vector<LoopOutcome> targets(static_cast<std::size_t>(n));
    std::vector<double> mean_target(size, 0.0);
    for (int r = 0; r < n; ++r) {
        targets[static_cast<std::size_t>(r)].params = target(r, size);
        for (std::size_t k = 0; k < size; ++k) mean_target[k] += target(r, size)[k] / n;
    }
    const double apart = spread(targets, mean_target);  // where local training alone ends
    for (const std::string algorithm : {"dpsgd", "sgp", "choco"}) {
        CAPTURE(algorithm);
        test::TempDir dir;
        const auto path = topology_file(
            dir, "ring", n,
            algorithm == "sgp" ? topology::WeightRule::push_sum : topology::WeightRule::uniform);
        auto job = make_inproc_job(n);
        const auto out = run_loops(n, [&](int r, LoopOutcome& me) {
            std::vector<float> x(size, 0.0f);
            const auto c = target(r, size);
            Peer peer(inproc_options(path, r, algorithm.c_str(), 300, job), x);
            do quadratic_step(x, c, 0.02);
            while (peer.step(0.0));
            me.metrics = peer.finish();
            me.params = x;
        });
        std::vector<double> mean_x(size, 0.0);
        for (const auto& o : out) {
            REQUIRE(o.error == "");
            for (std::size_t k = 0; k < size; ++k) mean_x[k] += o.params[k] / n;
        }
        const double together = spread(out, mean_x);
        CAPTURE(apart);
        CAPTURE(together);
        CHECK(together < 0.1 * apart);
        CHECK(spread(out, mean_target) < 0.1 * apart);  // and near the mean optimum
    }
}

TEST_CASE("async: one slow user loop does not stall the others") {
    test::TempDir dir;
    const int n = 4, slow = 3;
    const std::int64_t steps = 60;
    const auto path = topology_file(dir, "exponential", n, topology::WeightRule::push_sum);
    auto job = make_inproc_job(n);
    const auto t0 = Clock::now();
    const auto out = run_loops(n, [&](int r, LoopOutcome& me) {
        std::vector<float> x(8, 0.0f);
        const auto c = target(r, x.size());
        Peer peer(inproc_options(path, r, "async", steps, job), x);
        do {
            quadratic_step(x, c, 0.05);
            // The fast loops take 1 ms a step: at microseconds a fast peer could finish all its
            // steps before a neighbour's first share arrives, and it would have nothing to mix
            // (1 in 40 runs, at any commit).
            std::this_thread::sleep_for(std::chrono::milliseconds(r == slow ? 30 : 1));
        } while (peer.step(0.0));
        me.seconds = since(t0);
        me.metrics = peer.finish();
        me.params = x;
    });
    for (int r = 0; r < n; ++r) {
        const auto& o = out[static_cast<std::size_t>(r)];
        CAPTURE(r);
        CAPTURE(o.seconds);
        REQUIRE(o.error == "");
        CHECK(o.metrics.steps == steps);
        CHECK(o.metrics.messages_received > 0);
        if (r != slow) CHECK(o.seconds < 0.5 * out[slow].seconds);
    }
    CHECK(out[slow].seconds > 60 * 0.03);
}

TEST_CASE("allreduce: a neighbour that leaves mid-run ends step() with PeerFailure naming it") {
    test::TempDir dir;
    // The peers that stop on the failure leave at once too, and the in-process transport
    // reports departures in rank order, so the dead peer is rank 0 to be named first.
    const int n = 4, dead = 0;
    const auto path = topology_file(dir, "exponential", n, topology::WeightRule::uniform);
    auto job = make_inproc_job(n);
    const auto t0 = Clock::now();
    const auto out = run_loops(n, [&](int r, LoopOutcome& me) {
        std::vector<float> x(8, 0.0f);
        const auto c = target(r, x.size());
        Peer peer(inproc_options(path, r, "allreduce", 1000, job), x);
        for (int s = 0; r != dead || s < 10; ++s) {
            quadratic_step(x, c, 0.05);
            const bool more = peer.step(0.0);
            me.seconds = since(t0);
            if (!more) break;
        }
    });  // rank `dead` leaves after 10 steps: ~Peer stops it at once
    CHECK(out[dead].error == "");
    for (int r = 0; r < n; ++r) {
        if (r == dead) continue;
        const auto& o = out[static_cast<std::size_t>(r)];
        CAPTURE(r);
        CAPTURE(o.error);
        CHECK(o.failed_rank == dead);
        CHECK(o.error.find("peer 0 failed") != std::string::npos);
        CHECK(o.error.find('\n') == std::string::npos);
    }
    CHECK(since(t0) < 10.0);
}

TEST_CASE("dpsgd: a partition with a gossip period of 4 sends a quarter of the bytes per value") {
    test::TempDir dir;
    const int n = 4;
    const auto path = topology_file(dir, "ring", n, topology::WeightRule::uniform);
    auto job = make_inproc_job(n);
    const PartitionLayout layout({{"body", 0, 12}, {"head", 12, 12}}, 24);
    const auto out = run_loops(n, [&](int r, LoopOutcome& me) {
        std::vector<float> x(24, 0.0f);
        const auto c = target(r, x.size());
        auto o = inproc_options(path, r, "dpsgd", 40, job);
        o.partitions = R"({"partitions": {"head": {"gossip_period": 4}}})";
        Peer peer(o, x, layout);
        do quadratic_step(x, c, 0.05);
        while (peer.step(0.0));
        me.metrics = peer.finish();
    });
    for (const auto& o : out) {
        REQUIRE(o.error == "");
        REQUIRE(o.metrics.partition_bytes_sent.size() == 2);
        const auto body = static_cast<double>(o.metrics.partition_bytes_sent[0]);
        const auto head = static_cast<double>(o.metrics.partition_bytes_sent[1]);
        CAPTURE(body);
        CAPTURE(head);
        CHECK(head > 0);
        CHECK(body / head == doctest::Approx(4.0).epsilon(0.25));
    }
}

TEST_CASE("exact_average: every peer ends with the mean of the models it would have had") {
    test::TempDir dir;
    const int n = 4;
    const std::size_t size = 16;
    const auto path = topology_file(dir, "ring", n, topology::WeightRule::uniform);
    const auto train = [&](bool average) {
        auto job = make_inproc_job(n);
        return run_loops(n, [&](int r, LoopOutcome& me) {
            std::vector<float> x(size, 0.0f);
            const auto c = target(r, size);
            auto o = inproc_options(path, r, "dpsgd", 50, job);
            o.exact_average = average;
            Peer peer(o, x);
            do quadratic_step(x, c, 0.05);
            while (peer.step(0.0));
            me.metrics = peer.finish();
            me.params = x;
        });
    };
    const auto plain = train(false);  // dpsgd in-process is deterministic: the same models
    const auto averaged = train(true);
    std::vector<double> mean(size, 0.0);
    for (const auto& o : plain) {
        REQUIRE(o.error == "");
        for (std::size_t k = 0; k < size; ++k) mean[k] += o.params[k] / n;
    }
    CHECK(plain[0].params != plain[1].params);  // gossip alone leaves them apart
    for (const auto& o : averaged) {
        REQUIRE(o.error == "");
        CHECK(o.params == averaged[0].params);  // bitwise the same on every peer
        CHECK(o.metrics.average_of == std::vector<int>{0, 1, 2, 3});
        for (std::size_t k = 0; k < size; ++k) CHECK(o.params[k] == doctest::Approx(mean[k]));
    }
}
