// The outer layer's math (docs/algorithms/outer.md): its limits (the identity, local SGD,
// DiLoCo against a by-hand DiLoCo), its gossip forms on a complete graph, and the anchors'
// consensus on sparse and time-varying graphs, which must stay bounded.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/optimizers/local/training_worker.hpp"
#include "gossamer/optimizers/outer/outer_worker.hpp"
#include "gossamer/optimizers/protocol/registry.hpp"
#include "optimizers/harness/harness.hpp"

using namespace gossamer;
using Models = std::vector<std::vector<float>>;

namespace {

constexpr const char* kSgd =
    R"({"name": "sgd", "lr": 0.1, "momentum": 0.9, "nesterov": true, "weight_decay": 0.0001})";

// An MLP on synthetic data; `peers` shards of `samples`, batches of 20.
optim::TrainingConfig config(const std::string& outer, int samples = 1600, int epochs = 2,
                             const std::string& optimizer = kSgd) {
    return optim::parse_training_config(json::parse_text(
        R"({"seed": 2, "data": {"name": "logreg_synthetic", "samples": )" +
            std::to_string(samples) + R"(, "test_samples": 200, "features": 10, "seed": 4},
            "model": {"name": "mlp", "hidden": [16]}, "optimizer": )" +
            optimizer + R"(, "schedule": {"schedule": "cosine", "warmup_steps": 5},
            "training": {"epochs": )" +
            std::to_string(epochs) + R"(, "batch_size": 20})" +
            (outer.empty() ? "" : R"(, "outer": )" + outer) + "}",
        "t.json"));
}

std::shared_ptr<const topology::Schedule> graph(const std::string& family, int n) {
    topology::FamilySpec f;
    f.family = family;
    f.n = n;
    f.seed = 5;
    return topology::generate(f);
}

struct RunSpec {
    RunSpec(std::string a, std::string o, std::shared_ptr<const topology::Schedule> t)
        : algorithm(std::move(a)), options(std::move(o)), topology(std::move(t)) {}
    std::string algorithm = "allreduce";
    std::string options;  // JSON, "" for the defaults
    std::shared_ptr<const topology::Schedule> topology;
    /// Wraps every trainer in an OuterWorker with these options even where the config's
    /// section is the identity (which drivers skip): the layer's own arithmetic.
    std::optional<optim::OuterOptions> force;
    /// Called at every step start of rank 0 with the harness.
    std::function<void(testing::Harness&, std::int64_t)> on_rank0_step;
};

// The final models of n peers of spec.algorithm, driven by the protocol harness.
Models run(const optim::TrainingConfig& cfg, const optim::TrainingData& data, const RunSpec& spec) {
    const int n = spec.topology->n();
    std::vector<optim::TrainingWorker> workers;
    std::vector<std::unique_ptr<optim::OuterWorker>> forced;
    std::vector<std::unique_ptr<proto::Protocol>> owned;
    std::vector<proto::Protocol*> protocols;
    std::vector<proto::LocalWorker*> locals;
    std::optional<json::Document> options;
    if (!spec.options.empty()) options = json::parse_text(spec.options, "options.json");
    std::optional<json::Node> node;
    if (options) node.emplace(*options);
    for (int r = 0; r < n; ++r) {
        workers.push_back(optim::make_training_worker(cfg, data.train, r, n, cfg.epochs));
        auto& w = workers.back();
        proto::LocalWorker* worker = &w.protocol_worker();
        std::int64_t steps = w.steps;
        if (spec.force) {
            forced.push_back(std::make_unique<optim::OuterWorker>(*w.trainer, *spec.force,
                                                                  w.inner_steps, nullptr));
            worker = forced.back().get();
            steps = optim::outer_rounds(w.inner_steps, *spec.force);
        }
        proto::PeerContext ctx{r, n, spec.topology, worker, steps};
        owned.push_back(proto::make_protocol(spec.algorithm, node ? &*node : nullptr, ctx));
        protocols.push_back(owned.back().get());
        locals.push_back(worker);
    }
    testing::Harness h(protocols, locals);
    if (spec.on_rank0_step)
        h.on_step_start = [&](int rank, std::int64_t step) {
            if (rank == 0) spec.on_rank0_step(h, step);
        };
    REQUIRE(h.run());
    Models out;
    for (int r = 0; r < n; ++r) out.push_back(h.model(r));
    return out;
}

double norm(const std::vector<float>& a) {
    double s = 0;
    for (float v : a) s += double(v) * v;
    return std::sqrt(s);
}

double relative(const std::vector<float>& a, const std::vector<float>& b) {
    REQUIRE(a.size() == b.size());
    double d = 0;
    for (std::size_t i = 0; i < a.size(); ++i) d += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    return std::sqrt(d) / norm(b);
}

// sqrt(mean_i |x_i - mean|^2), as the simulator's consensus distance.
double consensus(const Models& m) {
    std::vector<double> mean(m[0].size(), 0.0);
    for (const auto& x : m)
        for (std::size_t i = 0; i < x.size(); ++i) mean[i] += x[i] / double(m.size());
    double s = 0;
    for (const auto& x : m)
        for (std::size_t i = 0; i < x.size(); ++i) s += (x[i] - mean[i]) * (x[i] - mean[i]);
    return std::sqrt(s / double(m.size()));
}

// DiLoCo written out by hand, with no protocol: n trainers, the anchor, the mean
// pseudo-gradient (in double), torch's Nesterov buffer.
std::vector<float> diloco_by_hand(const optim::TrainingConfig& plain, const optim::TrainingData& d,
                                  int n, int h, float lr, float mu) {
    std::vector<optim::TrainingWorker> w;
    for (int r = 0; r < n; ++r)
        w.push_back(optim::make_training_worker(plain, d.train, r, n, plain.epochs));
    std::vector<float> theta(w[0].trainer->params().begin(), w[0].trainer->params().end());
    std::vector<float> m(theta.size(), 0.0f), y(theta.size()), mean(theta.size());
    const std::int64_t total = w[0].steps;
    for (std::int64_t done = 0; done < total; done += h) {
        const std::int64_t k = std::min<std::int64_t>(h, total - done);
        std::vector<double> sum(theta.size(), 0.0);
        for (auto& wr : w) {
            y = theta;
            for (std::int64_t s = 0; s < k; ++s) {
                wr.trainer->compute_gradient(y);
                wr.trainer->apply_gradient(y, wr.trainer->gradient());
            }
            for (std::size_t i = 0; i < y.size(); ++i) sum[i] += double(theta[i] - y[i]);
        }
        for (std::size_t i = 0; i < theta.size(); ++i) {
            mean[i] = static_cast<float>(sum[i] / n);
            m[i] = mu * m[i] + mean[i];
            theta[i] -= lr * (mean[i] + mu * m[i]);
        }
    }
    return theta;
}

}  // namespace

TEST_CASE("outer: allreduce with outer sgd at lr 1 and no momentum is local SGD, period H") {
    // H = 3 does not divide the 40 steps: the last round is one step, as local SGD's last
    // average comes after the last step.
    const auto plain = config("");
    const auto data = optim::load_training_data(plain);
    RunSpec local{"allreduce", R"({"period": 3})", graph("ring", 4)};
    const Models reference = run(plain, data, local);
    RunSpec outer{"allreduce", "", local.topology};
    const Models got = run(config(R"({"steps": 3})"), data, outer);
    for (int r = 0; r < 4; ++r) {
        CAPTURE(r);
        const double e = relative(got[r], reference[r]);
        CAPTURE(e);
        CHECK(e <= 1e-6);
        CHECK(got[r] == got[0]);  // the all-reduce keeps the anchors identical
    }
    CHECK(relative(got[0], run(plain, data, RunSpec{"allreduce", "", local.topology})[0]) > 1e-3);
}

TEST_CASE("outer: H = 1 with outer sgd at lr 1 is today's algorithm") {
    // Without weight decay: the inner optimizer decays at the point its step starts from (the
    // round's anchor, z for push-sum), where sgp decays the numerator x and async the mixed z
    // at the step's end (docs/algorithms/outer.md, "Limits").
    const auto plain =
        config("", 1600, 2, R"({"name": "sgd", "lr": 0.1, "momentum": 0.9, "nesterov": true})");
    const auto data = optim::load_training_data(plain);
    optim::OuterOptions one;  // H = 1, sgd, lr 1, momentum 0
    for (const std::string algorithm : {"allreduce", "dpsgd", "sgp", "async"}) {
        CAPTURE(algorithm);
        RunSpec spec{algorithm, "", graph("ring", 4)};
        const Models reference = run(plain, data, spec);
        // The config's section at the identity: drivers skip the layer, bit for bit.
        const auto skipped =
            optim::make_training_worker(config(R"({"steps": 1})"), data.train, 0, 4, plain.epochs);
        CHECK_FALSE(skipped.outer);
        CHECK(run(config(R"({"steps": 1})", 1600, 2,
                         R"({"name": "sgd", "lr": 0.1, "momentum": 0.9, "nesterov": true})"),
                  data, spec) == reference);
        // Forced through the layer: x - (x - x') is x' up to rounding.
        spec.force = one;
        const Models got = run(plain, data, spec);
        for (int r = 0; r < 4; ++r) {
            const double e = relative(got[r], reference[r]);
            CAPTURE(e);
            CHECK(e <= 1e-6);
        }
    }
}

TEST_CASE("outer: allreduce with an outer Nesterov step is DiLoCo") {
    const auto plain = config("");
    const auto data = optim::load_training_data(plain);
    const auto cfg = config(R"({"steps": 4, "optimizer": "nesterov", "lr": 0.7, "momentum": 0.9})");
    RunSpec spec{"allreduce", "", graph("ring", 4)};
    const Models got = run(cfg, data, spec);
    const auto expected = diloco_by_hand(plain, data, 4, 4, 0.7f, 0.9f);
    const double e = relative(got[0], expected);
    CAPTURE(e);
    CHECK(e <= 1e-5);
    // And not local SGD: the outer step matters.
    CHECK(relative(got[0], run(config(R"({"steps": 4})"), data, spec)[0]) > 1e-3);
}

TEST_CASE("outer: DiLoCo over the rack-aware all-reduce is DiLoCo") {
    // n = 8 in racks of 2 and of 4 ("hierarchy"): DiLoCo over the ring (the by-hand DiLoCo, as
    // above) to float rounding, and every peer the same model.
    const auto plain = config("");
    const auto data = optim::load_training_data(plain);
    const auto cfg = config(R"({"steps": 4, "optimizer": "nesterov", "lr": 0.7, "momentum": 0.9})");
    const auto expected = run(cfg, data, RunSpec{"allreduce", "", graph("ring", 8)})[0];
    for (const char* options :
         {R"({"hierarchy": {"rack_size": 2}})", R"({"hierarchy": {"rack_size": 4}})"}) {
        CAPTURE(options);
        const Models got = run(cfg, data, RunSpec{"allreduce", options, graph("ring", 8)});
        const double e = relative(got[0], expected);
        CAPTURE(e);
        CHECK(e <= 1e-5);
        for (int r = 1; r < 8; ++r) CHECK(relative(got[r], got[0]) == 0.0);
    }
}

TEST_CASE("outer: dpsgd and sgp on a complete graph with uniform weights are DiLoCo") {
    const auto data = optim::load_training_data(config(""));
    const auto cfg = config(R"({"steps": 4, "optimizer": "nesterov", "lr": 0.7, "momentum": 0.9})");
    const Models diloco = run(cfg, data, RunSpec{"allreduce", "", graph("ring", 4)});
    // sgp without its default overlap (staleness 1 mixes the shares of the round before).
    for (const auto& [algorithm, options] :
         {std::pair<std::string, std::string>{"dpsgd", ""}, {"sgp", R"({"staleness": 0})"}}) {
        CAPTURE(algorithm);
        const Models got = run(cfg, data, RunSpec{algorithm, options, graph("complete", 4)});
        for (int r = 0; r < 4; ++r) {
            const double e = relative(got[r], diloco[0]);
            CAPTURE(e);
            CHECK(e <= 1e-5);
        }
    }
}

TEST_CASE("outer: the gossip forms keep the anchors' consensus bounded") {
    // 8 peers, 160 steps each in 40 rounds of 4, DiLoCo's outer step (lr 0.7, Nesterov 0.9).
    const auto cfg =
        config(R"({"steps": 4, "optimizer": "nesterov", "lr": 0.7, "momentum": 0.9})", 3200, 8);
    const auto data = optim::load_training_data(cfg);
    // What nothing pulling the anchors together gives: 8 peers that never mix (each its own
    // DiLoCo of one), the scale the bounded forms are held against.
    double apart = 0;
    {
        std::vector<std::vector<float>> alone;
        for (int r = 0; r < 8; ++r) {
            auto w = optim::make_training_worker(cfg, data.train, r, 8, cfg.epochs);
            auto& x = w.protocol_worker();
            for (std::int64_t s = 0; s < w.steps; ++s) {
                x.compute_gradient(x.params());
                x.apply_gradient(x.params(), x.gradient());
            }
            alone.emplace_back(x.params().begin(), x.params().end());
        }
        apart = consensus(alone);
    }
    MESSAGE("peers that never mix: consensus " << apart);
    for (const std::string family : {"ring", "one_peer_exponential", "random_matching"}) {
        for (const std::string algorithm : {"dpsgd", "sgp", "async", "choco"}) {
            CAPTURE(family);
            CAPTURE(algorithm);
            std::vector<double> series;  // at rank 0's round starts
            RunSpec spec{algorithm, "", graph(family, 8)};
            spec.on_rank0_step = [&](testing::Harness& h, std::int64_t) {
                Models m;
                for (int r = 0; r < h.size(); ++r) m.push_back(h.model(r));
                series.push_back(consensus(m));
            };
            const Models final_models = run(cfg, data, spec);
            REQUIRE(series.size() >= 30);
            const double first = *std::max_element(series.begin() + 1, series.begin() + 20);
            const double last = *std::max_element(series.end() - 10, series.end());
            const double end = consensus(final_models);
            MESSAGE(family << " " << algorithm << ": consensus, most in rounds 1-19 " << first
                           << ", in the last 10 " << last << ", at the end " << end);
            CHECK(last <= 1.5 * first);  // not growing
            CHECK(end <= 0.25 * apart);  // pulled together
        }
    }
}
