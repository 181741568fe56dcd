// The partition-ready event (docs/algorithms/protocol-contract.md, "Partition-ready"): a compute
// side declares a partition of the running step final, the protocol owns it from then on (a
// gradient changed after all stops the step with the partition named), and dpsgd (cta, atc, delayed
// atc) and choco (plain, delayed) mix, step and send the ready partitions' channels before the step
// ends: the same model bit for bit as without the event, in the simulator and with inproc
// peers, and sooner on a slow network.
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <string>

#include "gossamer/core/cluster.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/optimizers/protocol/registry.hpp"
#include "gossamer/optimizers/protocols/choco/choco.hpp"
#include "gossamer/optimizers/protocols/dpsgd/dpsgd.hpp"
#include "gossamer/peer/local.hpp"
#include "gossamer/sim/simulation.hpp"
#include "gossamer/topology/generators.hpp"

using namespace gossamer;

namespace {

// x and g of 8 values in two partitions, "a" = [0, 4) and "b" = [4, 8); SGD at rate 0.5.
class TwoPartWorker final : public proto::LocalWorker {
  public:
    TwoPartWorker() : layout_({{"a", 0, 4}, {"b", 4, 4}}, 8) {}
    std::size_t size() const override { return 8; }
    bool math() const override { return true; }
    std::span<float> params() override { return x_; }
    double compute_gradient(std::span<const float> at) override {
        for (std::size_t k = 0; k < 8; ++k) g_[k] = at[k] - 1.0f;
        return 0.0;
    }
    std::span<const float> gradient() const override { return g_; }
    std::vector<float>& mutable_gradient() { return g_; }
    void apply_gradient(std::span<float> x, std::span<const float> g) override {
        for (std::size_t k = 0; k < 8; ++k)
            if (!stepped_[k / 4]) x[k] -= 0.5f * g[k];
        stepped_[0] = stepped_[1] = false;
        ++steps_;
    }
    bool step_partition(std::size_t id, std::span<float> x, std::span<const float> g) override {
        if (id > 1 || stepped_[id]) return false;
        stepped_[id] = true;
        for (std::size_t k = 4 * id; k < 4 * id + 4; ++k) x[k] -= 0.5f * g[k];
        return true;
    }
    std::int64_t steps() const override { return steps_; }
    const PartitionLayout* partitions() const override { return &layout_; }

  private:
    PartitionLayout layout_;
    std::vector<float> x_ = std::vector<float>(8, 0.0f), g_ = std::vector<float>(8, 0.0f);
    std::int64_t steps_ = 0;
    bool stepped_[2] = {false, false};
};

std::shared_ptr<const topology::Schedule> ring(int n) {
    topology::FamilySpec f;
    f.family = "ring";
    f.n = n;
    f.weights = topology::WeightRule::uniform;
    return topology::generate(f);
}

// MLP 10-4-48-2: fc1 (44 values), fc2 (240), fc3 (98); the later layers are final first.
optim::TrainingConfig mlp_config() {
    return optim::parse_training_config(json::parse_text(R"({"seed": 2,
        "model": {"name": "mlp", "hidden": [4, 48]}, "optimizer": {"name": "sgd", "lr": 0.2, "momentum": 0.9},
        "data": {"name": "logreg_synthetic", "samples": 1600, "test_samples": 400, "features": 10, "seed": 4},
        "schedule": {"schedule": "cosine"}, "training": {"epochs": 2, "batch_size": 25}})",
                                                         "mlp.json"));
}

sim::SimResult simulate(const std::string& algorithm, const std::string& options,
                        const Cluster& cluster, const optim::TrainingConfig& cfg,
                        const optim::TrainingData& data) {
    sim::SimSetup s;
    s.algorithm = algorithm;
    s.options = json::Node(json::parse_text(options, "options.json"));
    s.topology = ring(4);
    s.cluster = &cluster;
    s.config = &cfg;
    s.train = &data.train;
    s.test = &data.test;
    s.epochs = cfg.epochs;
    s.eval_interval = 1.0;
    return sim::simulate(s);
}

}  // namespace

TEST_CASE("partition ready: a partition belongs to the protocol once declared, checked") {
    const json::Node options(
        json::parse_text(R"({"delay": 1, "partition_ready": true, "chunk_bytes": 16})",
                         "options.json"));  // one channel per partition
    const auto run_step = [&](std::size_t changed) {
        TwoPartWorker worker;
        proto::PeerContext ctx{0, 2, ring(2), &worker, 3};
        auto p = proto::make_protocol("dpsgd", &options, ctx);
        CHECK(p->takes_partition_ready());
        proto::Actions a;
        CHECK_THROWS_AS(p->partition_ready(0, 1, a), Error);  // no step runs yet
        p->start(0, a);
        REQUIRE(a.start_step);
        worker.compute_gradient(p->compute_point());
        a = {};
        CHECK_THROWS_AS(p->partition_ready(0.5, 2, a), Error);  // no partition 2
        p->partition_ready(0.5, 1, a);  // "b" is final: its round-0 message leaves now
        CHECK(p->partition_is_ready(1));
        CHECK_FALSE(p->partition_is_ready(0));
        CHECK(a.sends.size() == 1);
        CHECK(a.sends[0].msg.partition == 0);
        CHECK(a.sends[0].msg.chunk == 1);            // the range of "b"
        worker.mutable_gradient()[changed] += 1.0f;  // the compute side writes after all
        a = {};
        p->step_finished(1, 0, a);
    };
    run_step(0);  // partition "a" was not declared: still the compute side's
    try {
        run_step(5);  // partition "b" was
        FAIL("no error");
    } catch (const Error& e) {
        const std::string what = e.what();
        CAPTURE(what);
        CHECK(what.find("partition 1 ('b')") != std::string::npos);
        CHECK(what.find("changed after it was declared ready") != std::string::npos);
    }
}

TEST_CASE("partition ready: dpsgd and choco send early, the same model, sim = inproc peers") {
    const auto cfg = mlp_config();
    const auto data = optim::load_training_data(cfg);
    // A slow network: a round's messages take about a step, so sending sooner finishes sooner.
    auto cluster = homogeneous_cluster(4, 0.01, 1e-3, 2e5);
    for (auto& p : cluster.peers) p.jitter = {JitterKind::uniform, 0, 0.5};
    // The gain is measured where each uplink serialises its messages (fifo). Under fair sharing
    // an early channel shares the uplink with the rest of the step's sends instead of going
    // first, and dpsgd's end moved from 0.753 s to 0.778 s (docs/algorithms/protocol-contract.md).
    cluster.network_model = NetworkModel::fifo;
    // Real peers (the driver declares partitions while it pads a step to its declared time):
    // the simulator's model. `early` counts steps after which channels had left early,
    // `during` first steps that had sent some before they ended.
    const auto real = [&](const std::string& algorithm, const std::string& text,
                          std::atomic<std::uint64_t>& early, std::atomic<std::uint64_t>& during) {
        const json::Node options(json::parse_text(text, "options.json"));
        peer::LocalTraining t;
        t.algorithm = algorithm;
        t.algorithm_options = &options;
        t.topology = ring(4);
        t.config = &cfg;
        t.train = &data.train;
        t.test = &data.test;
        t.epochs = cfg.epochs;
        t.options = [](int r) {
            peer::DriverOptions o;
            o.run_timeout = peer::Millis(60'000);
            const double pad = 0.001 * (r + 1);  // unequal real step times
            o.declared_step_time = [pad](std::int64_t, double) { return pad; };
            return o;
        };
        t.attach = [&early, &during](int, const proto::Protocol& p, peer::DriverOptions& o) {
            o.on_step = [&early, &during, &p](const peer::StepRecord& s) {
                // Called when the step is over, before partitions left undeclared are declared.
                const auto* d = dynamic_cast<const proto::Dpsgd*>(&p);
                const auto* c = dynamic_cast<const proto::Choco*>(&p);
                if ((d ? d->early_sends() : c->early_sends()) == 0) return;
                early.fetch_add(1, std::memory_order_relaxed);
                if (s.step == 0) during.fetch_add(1, std::memory_order_relaxed);
            };
        };
        const auto res = peer::run_local_training(t);
        for (const auto& o : res.peers) {
            REQUIRE(o.error == "");
            REQUIRE(o.result);
        }
        REQUIRE(res.loss);
        return *res.loss;
    };
    const std::pair<const char*, const char*> jobs[] = {{"dpsgd", R"("delay": 1)"},
                                                        {"dpsgd", R"("mode": "cta")"},
                                                        {"dpsgd", R"("mode": "atc")"},
                                                        {"choco", R"("delay": 1)"},
                                                        {"choco", R"("gamma": 0.5)"}};
    for (const auto& [algorithm_text, mode_text] : jobs) {
        const std::string algorithm = algorithm_text, mode = mode_text;
        CAPTURE(algorithm);
        CAPTURE(mode);
        const std::string plain = "{" + mode + R"(, "chunk_bytes": 256})";
        const std::string ready = "{" + mode + R"(, "chunk_bytes": 256, "partition_ready": true})";
        const auto a = simulate(algorithm, plain, cluster, cfg, data);
        const auto b = simulate(algorithm, ready, cluster, cfg, data);
        CHECK(std::isfinite(a.evals.back().loss));
        CHECK(a.evals.back().loss < 0.9 * a.evals.front().loss);  // it trains
        CHECK(b.evals.back().loss == a.evals.back().loss);        // the same values, bit for bit
        CAPTURE(a.end_time);
        CAPTURE(b.end_time);
        // Sooner; cta can mix round t early only once it is in, and on a network this slow it
        // comes after the step: the same end.
        if (mode.find("cta") == std::string::npos)
            CHECK(b.end_time < a.end_time);
        else
            CHECK(b.end_time <= a.end_time);
        std::atomic<std::uint64_t> none{0}, none_during{0}, some{0}, some_during{0};
        CHECK(real(algorithm, plain, none, none_during) == a.evals.back().loss);
        CHECK(real(algorithm, ready, some, some_during) == a.evals.back().loss);
        CHECK(none.load() == 0);
        CHECK(some.load() > 0);  // channels left before their step's end
        // ... while the first step ran (cta's first step waits for its neighbours' x_0 first)
        if (mode.find("cta") == std::string::npos) CHECK(some_during.load() > 0);
    }
}

TEST_CASE("partition ready: refused where it is not built, naming the option") {
    const auto refused = [](const char* text, const char* why) {
        CAPTURE(text);
        const json::Node options(json::parse_text(text, "train.json"));
        try {
            TwoPartWorker worker;
            proto::PeerContext ctx{0, 2, ring(2), &worker, 1};
            (void)proto::make_protocol("dpsgd", &options, ctx);
            FAIL("accepted");
        } catch (const ConfigError& e) {
            const std::string what = e.what();
            CAPTURE(what);
            CHECK(what.find("partition_ready") != std::string::npos);
            CHECK(what.find(why) != std::string::npos);
        }
    };
    refused(R"({"partition_ready": true, "reweight": {"wait": 0.1}})", "reweight");
    refused(R"({"mode": "cta", "reweight": {}, "partition_ready": true})", "reweight");
    refused(R"({"delay": 1, "partition_ready": 1})", "true or false");
    // Accepted but inert where nothing declares partitions (a cost-only worker).
    const json::Node options(
        json::parse_text(R"({"delay": 1, "partition_ready": true})", "train.json"));
    proto::CostOnlyWorker cost(8);
    proto::PeerContext ctx{0, 2, ring(2), &cost, 1};
    CHECK_FALSE(proto::make_protocol("dpsgd", &options, ctx)->takes_partition_ready());
}
