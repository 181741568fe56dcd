// The delayed rules and chunked sends bit for bit: `gossamer sim` (virtual time) and real-time
// inproc peers (one thread each, the real driver) train the same job to the same final model,
// so the same loss to the last bit, while the delayed rule differs from the plain one and the
// chunked one does not.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "gossamer/core/cluster.hpp"
#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/peer/local.hpp"
#include "gossamer/sim/simulation.hpp"
#include "gossamer/topology/schedule.hpp"

using namespace gossamer;

namespace {

constexpr const char* kData = R"("data": {"name": "logreg_synthetic", "samples": 1600,
    "test_samples": 400, "features": 10, "seed": 4}, "schedule": {"schedule": "cosine"},
    "training": {"epochs": 3, "batch_size": 25})";

optim::TrainingConfig logreg_config() {
    return optim::parse_training_config(
        json::parse_text(std::string(R"({"seed": 2, "model": {"name": "softmax"},
        "optimizer": {"name": "sgd", "lr": 0.2, "momentum": 0.9}, )") +
                             kData + "}",
                         "logreg.json"));
}

// An MLP 10-8-2 with fc1 a slow partition (period 2, gossiped every second step).
optim::TrainingConfig multirate_config() {
    return optim::parse_training_config(
        json::parse_text(std::string(R"({"seed": 2, "model": {"name": "mlp", "hidden": [8]},
        "optimizer": {"name": "sgd", "lr": 0.2}, "partitions": {"fast": ["fc2"], "slow": ["*"]},
        "multirate": {"partitions": {"slow": {"period": 2, "gossip_period": 2}}}, )") +
                             kData + "}",
                         "multirate.json"));
}

std::shared_ptr<const topology::Schedule> topology_for(const char* family, int n) {
    topology::FamilySpec f;
    f.family = family;
    f.n = n;
    f.weights = topology::WeightRule::uniform;
    return topology::generate(f);
}

struct Job {
    std::string algorithm;
    const char* options;
    const char* family;
    bool multirate = false;
};

sim::SimResult simulate_job(const Job& job, const optim::TrainingConfig& cfg,
                            const optim::TrainingData& data) {
    const int n = 4;
    // Jitter puts the peers out of step, so rounds arrive at every point of the next step.
    auto cluster = homogeneous_cluster(n, 0.01, 2e-3, 1e7);
    for (auto& p : cluster.peers) p.jitter = {JitterKind::uniform, 0, 0.9};
    sim::SimSetup s;
    s.algorithm = job.algorithm;
    s.options = json::Node(json::parse_text(job.options, "options.json"));
    s.topology = topology_for(job.family, n);
    s.cluster = &cluster;
    s.config = &cfg;
    s.train = &data.train;
    s.test = &data.test;
    s.epochs = cfg.epochs;
    s.eval_interval = 1.0;
    return sim::simulate(s);
}

// The final loss, and the first (at time 0).
std::pair<double, double> simulated_loss(const Job& job, const optim::TrainingConfig& cfg,
                                         const optim::TrainingData& data) {
    const auto r = simulate_job(job, cfg, data);
    return {r.evals.back().loss, r.evals.front().loss};
}

double real_loss(const Job& job, const optim::TrainingConfig& cfg,
                 const optim::TrainingData& data) {
    const json::Node options(json::parse_text(job.options, "options.json"));
    peer::LocalTraining t;
    t.algorithm = job.algorithm;
    t.algorithm_options = &options;
    t.topology = topology_for(job.family, 4);
    t.config = &cfg;
    t.train = &data.train;
    t.test = &data.test;
    t.epochs = cfg.epochs;
    t.options = [](int r) {
        peer::DriverOptions o;
        o.run_timeout = peer::Millis(60'000);
        // Unequal real step times: the real order of events differs from the simulator's.
        const double pad = 0.001 * (r + 1);
        o.declared_step_time = [pad](std::int64_t, double) { return pad; };
        return o;
    };
    const auto res = peer::run_local_training(t);
    for (const auto& o : res.peers) {
        REQUIRE(o.error == "");
        REQUIRE(o.result);
        CHECK(o.result->steps == 1600 / 4 / cfg.batch_size * cfg.epochs);
    }
    REQUIRE(res.loss);
    return *res.loss;
}

}  // namespace

TEST_CASE("delayed dpsgd atc and choco: sim and inproc peers end with the same loss, bit for bit") {
    const auto logreg = logreg_config();
    const auto mr = multirate_config();
    const auto data = optim::load_training_data(logreg);
    const Job jobs[] = {
        {"dpsgd", R"({"delay": 1})", "one_peer_exponential"},
        {"dpsgd", R"({"delay": 1})", "ring"},
        {"choco", R"({"delay": 1})", "ring"},
        {"choco", R"({"delay": 1, "compressor": {"name": "topk", "fraction": 0.3}})",
         "one_peer_exponential"},
        {"dpsgd", R"({"delay": 1})", "one_peer_exponential", true},
        {"choco", R"({"delay": 1})", "ring", true},
    };
    for (const Job& job : jobs) {
        const auto& cfg = job.multirate ? mr : logreg;
        CAPTURE(job.multirate);
        CAPTURE(job.algorithm);
        CAPTURE(job.options);
        CAPTURE(job.family);
        const auto [sim, first] = simulated_loss(job, cfg, data);
        const double real = real_loss(job, cfg, data);
        CHECK(std::isfinite(sim));
        CHECK(sim == real);  // the same models: every float of every peer
        // The delayed rule is another rule: the plain one ends elsewhere.
        Job plain = job;
        plain.options = "{}";
        if (std::string(job.options).find("topk") == std::string::npos)
            CHECK(simulated_loss(plain, cfg, data).first != sim);
        CHECK(sim < 0.9 * first);  // it trains
    }
}

TEST_CASE("chunked dpsgd and choco: sim and inproc bit for bit, and the same model as unchunked") {
    const auto logreg = logreg_config();  // softmax 10 -> 2: 22 values, chunks of 4, 3 or 5
    const auto mr = multirate_config();
    const auto data = optim::load_training_data(logreg);
    struct Case {
        Job chunked;
        const char* whole;  // the same options without chunk_bytes
    };
    const Case cases[] = {
        {{"dpsgd", R"({"chunk_bytes": 16})", "ring"}, "{}"},
        {{"dpsgd", R"({"chunk_bytes": 12, "mode": "cta"})", "one_peer_exponential"},
         R"({"mode": "cta"})"},
        {{"dpsgd", R"({"chunk_bytes": 16, "delay": 1})", "one_peer_exponential"},
         R"({"delay": 1})"},
        {{"dpsgd", R"({"chunk_bytes": 20})", "ring", true}, "{}"},  // each partition cut alone
        {{"choco", R"({"chunk_bytes": 16})", "ring"}, "{}"},        // fp16: element by element
        {{"choco", R"({"chunk_bytes": 8, "delay": 1})", "one_peer_exponential"}, R"({"delay": 1})"},
        {{"choco", R"({"chunk_bytes": 12})", "ring", true}, "{}"},
    };
    for (const Case& c : cases) {
        const Job& job = c.chunked;
        const auto& cfg = job.multirate ? mr : logreg;
        const std::string options = job.options, family = job.family;
        CAPTURE(job.algorithm);
        CAPTURE(options);
        CAPTURE(family);
        CAPTURE(job.multirate);
        const auto [sim, first] = simulated_loss(job, cfg, data);
        CHECK(std::isfinite(sim));
        CHECK(sim < 0.9 * first);  // it trains
        CHECK(sim == real_loss(job, cfg, data));
        // Chunks change the messages, not the arithmetic: every value is mixed as before.
        Job whole = job;
        whole.options = c.whole;
        CHECK(simulated_loss(whole, cfg, data).first == sim);
        // The same values in more messages: only headers (88 bytes each) are added in fp32
        // (choco's fp16 also pads each chunk's payload to whole 4-byte words).
        const auto a = simulate_job(job, cfg, data), b = simulate_job(whole, cfg, data);
        const auto extra = a.peers[0].bytes_sent - b.peers[0].bytes_sent;
        CHECK(extra > 0);
        if (job.algorithm == "dpsgd") CHECK(extra % 88 == 0);
    }
}
