// gossamer::Peer with PeerOptions::outer (docs/library/api.md, "Outer rounds"): the user's own
// optimizer is the inner one. Outer SGD at lr 1 without momentum is allreduce's local SGD
// ("period" H); Nesterov runs with every peer on the same anchor under allreduce; the step
// counts line up (step() calls, rounds, a last short round, finish() early) and the timeline
// shows the rounds with their inner steps; bad options are one line before anything starts.
#include <doctest/doctest.h>

#include <cmath>

#include "api_peers.hpp"
#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/optimizers/local/training_worker.hpp"
#include "gossamer/optimizers/protocol/device.hpp"
#include "support/errors.hpp"

using namespace api_test;
using test::contains;

namespace {

optim::TrainingConfig logreg_config() {
    return optim::parse_training_config(json::parse_text(R"({"seed": 3,
        "data": {"name": "logreg_synthetic", "samples": 1600, "test_samples": 400, "features": 10, "seed": 4},
        "model": {"name": "softmax"}, "optimizer": {"name": "sgd", "lr": 0.2, "momentum": 0.5},
        "schedule": {"schedule": "cosine"}, "training": {"epochs": 3, "batch_size": 20}})",
                                                         "logreg.json"));
}

optim::OuterOptions outer(std::int64_t h, optim::OuterKind kind, double lr, double momentum) {
    optim::OuterOptions o;
    o.steps = h;
    o.kind = kind;
    o.lr = lr;
    o.momentum = momentum;
    return o;
}

struct Run {
    std::vector<LoopOutcome> peers;
    std::vector<std::int64_t> calls;  // step() calls each loop made (its last returned false)
};

// n user loops of the config's trainer (its gradient and SGD with momentum: the user's
// optimizer) over allreduce; `edit` sets the options; `stop_after` > 0: rank 0 calls finish()
// after that many steps.
Run train(const std::string& topology, int n, const optim::TrainingConfig& cfg,
          const optim::TrainingData& data, const std::function<void(PeerOptions&)>& edit,
          std::int64_t stop_after = 0) {
    auto job = make_inproc_job(n);
    Run run;
    run.calls.assign(static_cast<std::size_t>(n), 0);
    run.peers = run_loops(n, [&](int r, LoopOutcome& me) {
        auto w = optim::make_training_worker(cfg, data.train, r, n, cfg.epochs);
        auto& trainer = *w.trainer;
        std::vector<float> p(trainer.params().begin(), trainer.params().end());
        PeerOptions o = inproc_options(topology, r, "allreduce", w.inner_steps, job);
        edit(o);
        Peer peer(o, p);
        auto& calls = run.calls[static_cast<std::size_t>(r)];
        bool more = true;
        while (more) {
            if (r == 0 && stop_after > 0 && calls == stop_after) break;
            CHECK(peer.steps_left() == w.inner_steps - calls);
            const double loss = trainer.compute_gradient(p);
            trainer.apply_gradient(p, trainer.gradient());
            ++calls;
            more = peer.step(loss);
        }
        me.metrics = peer.finish();
        me.params = p;
    });
    for (const auto& o : run.peers) REQUIRE(o.error == "");
    return run;
}

double relative(const std::vector<float>& a, const std::vector<float>& b) {
    double d = 0, nb = 0;
    for (std::size_t k = 0; k < a.size(); ++k) {
        d += (double(a[k]) - b[k]) * (double(a[k]) - b[k]);
        nb += double(b[k]) * b[k];
    }
    return std::sqrt(d / nb);
}

}  // namespace

TEST_CASE("Peer outer sgd lr 1 momentum 0 with H = 4 is allreduce's period 4 within 1e-6") {
    test::TempDir dir;
    const int n = 4;
    const auto path = topology_file(dir, "ring", n, topology::WeightRule::uniform);
    const auto cfg = logreg_config();
    const auto data = optim::load_training_data(cfg);
    const Run plain =
        train(path, n, cfg, data, [](PeerOptions& o) { o.algorithm_options = R"({"period": 4})"; });
    const Run rounds = train(path, n, cfg, data, [](PeerOptions& o) {
        o.outer = outer(4, optim::OuterKind::sgd, 1.0, 0.0);
    });
    const auto w = optim::make_training_worker(cfg, data.train, 0, n, cfg.epochs);
    REQUIRE(w.inner_steps == 60);  // 400 samples / 20 a batch x 3 epochs: 15 rounds of 4
    for (int r = 0; r < n; ++r) {
        const auto& a = rounds.peers[static_cast<std::size_t>(r)];
        const auto& b = plain.peers[static_cast<std::size_t>(r)];
        INFO("rank " << r);
        CHECK(relative(a.params, b.params) < 1e-6);
        CHECK(relative(a.params, b.params) > 0);  // theta - (theta - y) is not y: a real test
        CHECK(rounds.calls[static_cast<std::size_t>(r)] == 60);
        CHECK(a.metrics.steps == 60);
        CHECK(a.metrics.rounds == 15);
        CHECK(a.metrics.finished);
    }
}

TEST_CASE("Peer outer nesterov keeps every allreduce peer on one anchor, a short last round") {
    test::TempDir dir;
    const int n = 4;
    const auto path = topology_file(dir, "ring", n, topology::WeightRule::uniform);
    const auto cfg = logreg_config();
    const auto data = optim::load_training_data(cfg);
    const auto nesterov = outer(7, optim::OuterKind::nesterov, 0.7, 0.9);
    // Rank 0 writes its timeline: the rounds with their inner steps (docs/formats/trace.md).
    const auto trace = (dir.path() / "outer.trace.json").string();
    const Run run = train(path, n, cfg, data, [&](PeerOptions& o) {
        o.outer = nesterov;
        if (o.rank == 0) o.trace_path = trace;
    });
    const Run plain = train(path, n, cfg, data, [](PeerOptions&) {});
    for (int r = 0; r < n; ++r) {
        const auto& a = run.peers[static_cast<std::size_t>(r)];
        INFO("rank " << r);
        CHECK(a.params == run.peers[0].params);  // the same mean, the same outer step
        CHECK(run.calls[static_cast<std::size_t>(r)] == 60);
        CHECK(a.metrics.steps == 60);
        CHECK(a.metrics.rounds == 9);  // ceil(60 / 7): the last round has 4 inner steps
        for (float v : a.params) REQUIRE(std::isfinite(v));
    }
    CHECK(relative(run.peers[0].params, plain.peers[0].params) > 1e-4);  // it did something
    std::int64_t rounds = 0, inner = 0;
    double round_end = 0;
    const auto doc = json::load_file(trace);  // held: the loop reads into it
    for (const auto& e : (*doc.root)["traceEvents"]) {
        const std::string cat = e.value("cat", "");
        if (cat == "round") {
            CHECK(e["args"]["round"].get<std::int64_t>() == rounds);
            CHECK(e["args"]["H"].get<std::int64_t>() == 7);
            CHECK(e["args"]["steps"].get<std::int64_t>() == (rounds < 8 ? 7 : 4));
            round_end = e["ts"].get<double>() + e["dur"].get<double>();
            ++rounds;
        } else if (cat == "step") {
            CHECK(e["args"]["step"].get<std::int64_t>() == inner);
            CHECK(e["args"]["round"].get<std::int64_t>() == rounds - 1);
            CHECK(e["ts"].get<double>() + e["dur"].get<double>() <= round_end + 0.01);
            ++inner;
        }
    }
    CHECK(rounds == 9);
    CHECK(inner == 60);
    // finish() after 10 steps on rank 0: its other 50 inner steps are zero updates, and the
    // others (which need its rounds under allreduce) still end.
    const Run early = train(
        path, n, cfg, data, [&](PeerOptions& o) { o.outer = nesterov; }, 10);
    CHECK(early.calls[0] == 10);
    CHECK(early.peers[0].metrics.rounds == 9);
    CHECK(early.peers[1].metrics.rounds == 9);
    CHECK(early.peers[1].params == early.peers[0].params);
}

TEST_CASE("Peer outer: bad options and refused combinations are one line, nothing started") {
    test::TempDir dir;
    const auto path = topology_file(dir, "ring", 4, topology::WeightRule::uniform);
    const auto refused = [&](const char* algorithm, const std::function<void(PeerOptions&)>& edit) {
        PeerOptions o = inproc_options(path, 0, algorithm, 10, make_inproc_job(4));
        o.outer = outer(4, optim::OuterKind::nesterov, 0.7, 0.9);
        edit(o);
        std::vector<float> x(8, 0.0f);
        const std::string msg = test::config_error([&] { Peer peer(o, x); });
        CHECK(msg.find('\n') == std::string::npos);
        return msg;
    };
    CHECK(contains(refused("dpsgd", [](PeerOptions& o) { o.outer->steps = 0; }),
                   "PeerOptions::outer.steps: 0 inner steps per round"));
    CHECK(contains(refused("dpsgd", [](PeerOptions& o) { o.outer->lr = -1; }),
                   "PeerOptions::outer.lr"));
    CHECK(contains(refused("dpsgd", [](PeerOptions& o) { o.outer->lr = NAN; }),
                   "PeerOptions::outer.lr"));
    CHECK(contains(refused("dpsgd", [](PeerOptions& o) { o.outer->momentum = 1.0; }),
                   "PeerOptions::outer.momentum: outer momentum 1 is outside [0, 1)"));
    CHECK(contains(refused("dpsgd", [](PeerOptions& o) { o.outer->momentum = 0; }),
                   "Nesterov's outer step needs momentum > 0"));
    CHECK(contains(refused("dpsgd", [](PeerOptions& o) { o.outer->partitions = {"head"}; }),
                   "PeerOptions::outer.partitions: no partition \"head\""));
    CHECK(contains(refused("dpsgd",
                           [](PeerOptions& o) {
                               o.outer->seconds = 1.0;
                               o.outer->reference_steps = 4;
                           }),
                   "PeerOptions::outer.seconds: rounds by time are not offered to gossamer::Peer"));
    CHECK(contains(refused("dpsgd",
                           [](PeerOptions& o) {
                               o.outer->kind = optim::OuterKind::delayed_nesterov;
                               o.outer->delay = 0;
                           }),
                   "PeerOptions::outer.delay: a delay of 0 rounds"));
    CHECK(contains(refused("gadmm", [](PeerOptions&) {}), "PeerOptions::outer: gadmm"));
    CHECK(contains(
        refused("allreduce", [](PeerOptions& o) { o.algorithm_options = R"({"period": 4})"; }),
        "PeerOptions::outer: allreduce with \"period\" > 1"));
    CHECK(contains(refused("dpsgd",
                           [](PeerOptions& o) {
                               o.partitions = R"({"partitions": {"all": {"gossip_period": 2}}})";
                           }),
                   "PeerOptions::outer: multirate"));
    // A device worker: the outer layer keeps host vectors.
    auto dev = proto::emulated_device();
    PeerOptions o = inproc_options(path, 0, "dpsgd", 10, make_inproc_job(4));
    o.outer = outer(4, optim::OuterKind::sgd, 1.0, 0.0);
    o.device = "emulated";
    proto::DeviceVector p(*dev, 8);
    const std::string msg = test::config_error([&] { Peer peer(o, p.span()); });
    CHECK(contains(msg, "PeerOptions::outer: the outer layer keeps its vectors in host memory"));
}

TEST_CASE("Peer outer with streaming fragments: sub-rounds, one fragment is the plain layer") {
    test::TempDir dir;
    const int n = 4;
    const auto path = topology_file(dir, "ring", n, topology::WeightRule::uniform);
    const auto cfg = logreg_config();
    const auto data = optim::load_training_data(cfg);
    const auto nesterov = outer(4, optim::OuterKind::nesterov, 0.7, 0.9);
    const auto with = [&](std::int64_t fragments, double alpha) {
        return [=](PeerOptions& o) {
            o.algorithm = "dpsgd";
            o.outer = nesterov;
            o.outer->fragments = fragments;
            o.outer->alpha = alpha;
            o.outer->overlap = fragments > 1 ? 1 : 0;
        };
    };
    const Run plain = train(path, n, cfg, data, with(0, 0.5));
    const Run one = train(path, n, cfg, data, with(1, 0.0));
    const Run two = train(path, n, cfg, data, with(2, 0.5));
    for (int r = 0; r < n; ++r) {
        INFO("rank " << r);
        const auto& a = two.peers[static_cast<std::size_t>(r)];
        CHECK(one.peers[static_cast<std::size_t>(r)].params ==
              plain.peers[static_cast<std::size_t>(r)].params);
        CHECK(a.metrics.steps == 60);
        CHECK(a.metrics.rounds == 30);  // sub-rounds of 2 inner steps
        CHECK(a.metrics.finished);
        CHECK(relative(a.params, plain.peers[static_cast<std::size_t>(r)].params) > 1e-4);
    }
    // Refusals, one line each, naming the option.
    const auto refused = [&](const char* algorithm, const std::function<void(PeerOptions&)>& edit) {
        PeerOptions o = inproc_options(path, 0, algorithm, 10, make_inproc_job(4));
        with(2, 0.5)(o);
        o.algorithm = algorithm;
        edit(o);
        std::vector<float> x(8, 0.0f);
        const std::string msg = test::config_error([&] { Peer peer(o, x); });
        CHECK(msg.find('\n') == std::string::npos);
        return msg;
    };
    CHECK(contains(refused("allreduce", [](PeerOptions&) {}),
                   "PeerOptions::outer.fragments: allreduce sends the whole model every round"));
    CHECK(contains(refused("dpsgd", [](PeerOptions& o) { o.outer->fragments = 3; }),
                   "PeerOptions::outer.fragments: 3 fragments do not divide a round of 4"));
    CHECK(contains(refused("dpsgd", [](PeerOptions& o) { o.outer->alpha = 1; }),
                   "PeerOptions::outer.alpha: alpha 1 is outside [0, 1)"));
    CHECK(contains(refused("dpsgd",
                           [](PeerOptions& o) {
                               o.outer->steps = 16;
                               o.outer->fragments = 16;
                           }),
                   "PeerOptions::outer.fragments: 16 fragments of a model of 8 values"));
}
