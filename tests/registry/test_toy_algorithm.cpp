// Adding an algorithm (docs/algorithms/README.md): toy_average is a folder of its own
// (toy_algorithm/) and the one register_algorithm line below; the simulator, the real-time
// peer driver and gossamer::Peer then run it by name with no edit of theirs.
#include <doctest/doctest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/optimizers/protocol/questions.hpp"
#include "gossamer/peer.hpp"
#include "gossamer/peer/local.hpp"
#include "gossamer/sim/setup_checks.hpp"
#include "gossamer/sim/simulation.hpp"
#include "gossamer/topology/topology_file.hpp"
#include "support/temp_dir.hpp"
#include "toy_algorithm/toy_average.hpp"

using namespace gossamer;

// The one line.
static const bool registered = (proto::register_algorithm(toy::toy_average_algorithm()), true);

namespace {

constexpr int kPeers = 4;

optim::TrainingConfig logreg_config() {
    return optim::parse_training_config(json::parse_text(R"({"seed": 2,
        "data": {"name": "logreg_synthetic", "samples": 1600, "test_samples": 400, "features": 10, "seed": 4},
        "model": {"name": "softmax"}, "optimizer": {"name": "sgd", "lr": 0.2},
        "schedule": {"schedule": "cosine"}, "training": {"epochs": 3, "batch_size": 20}})",
                                                         "logreg.json"));
}

topology::FamilySpec exponential() {
    topology::FamilySpec f;
    f.family = "exponential";
    f.n = kPeers;
    f.weights = topology::WeightRule::uniform;
    return f;
}

sim::SimResult simulate(const std::string& algorithm, const optim::TrainingConfig& cfg,
                        const optim::TrainingData& data, const Cluster& cluster) {
    sim::SimSetup s;
    s.algorithm = algorithm;
    s.topology = topology::generate(exponential());
    s.cluster = &cluster;
    s.config = &cfg;
    s.train = &data.train;
    s.test = &data.test;
    s.epochs = cfg.epochs;
    s.eval_interval = 1.0;
    sim::check_sizes(s, 33, {"logreg.json", ""});  // the checks gossamer sim makes first
    return sim::simulate(s);
}

}  // namespace

TEST_CASE("toy_average is registered by one line: after the built-in ones, built by name") {
    REQUIRE(registered);
    const auto names = proto::protocol_names();
    REQUIRE(names.size() > 8);
    CHECK(names[8] == "toy_average");  // registered before main(), after algorithm_list.hpp's
    CHECK(proto::algorithm("toy_average").summary.find("uniform average") != std::string::npos);
    proto::CostOnlyWorker worker(8);
    const auto p = proto::make_protocol(
        "toy_average", nullptr,
        proto::PeerContext{0, kPeers, topology::generate(exponential()), &worker, 5});
    CHECK(p->name() == "toy_average");
    // Every driver question has its default answer.
    CHECK_FALSE(proto::elastic_refusal("toy_average").empty());
    CHECK(p->elastic_refusal() == proto::elastic_refusal("toy_average"));
    CHECK_FALSE(p->failure_stops_job());
}

TEST_CASE("toy_average in the simulator and in real-time inproc peers: the same training") {
    const auto cfg = logreg_config();
    const auto data = optim::load_training_data(cfg);
    const auto cluster = homogeneous_cluster(kPeers, 0.01, 1e-5, 1e9);
    const auto toy = simulate("toy_average", cfg, data, cluster);
    const auto baseline = simulate("allreduce", cfg, data, cluster);
    REQUIRE(!toy.evals.empty());
    const double loss = toy.evals.back().loss;
    CAPTURE(loss);
    CAPTURE(baseline.evals.back().loss);
    CHECK(loss < 0.9 * std::log(2.0));  // it learned
    CHECK(std::abs(loss / baseline.evals.back().loss - 1) < 0.05);
    const std::int64_t steps = 1600 / kPeers / cfg.batch_size * cfg.epochs;
    for (const auto& p : toy.peers) {
        CHECK(p.steps == steps);
        CHECK(p.bytes_sent > 0);
    }
    CHECK_FALSE(toy.stopped_by_failure.has_value());
    // Deterministic, as every protocol in the simulator.
    CHECK(simulate("toy_average", cfg, data, cluster).evals.back().loss == loss);

    // The same job on the real-time driver, peers as threads: the same exact average.
    peer::LocalTraining job;
    job.algorithm = "toy_average";
    job.topology = topology::generate(exponential());
    job.config = &cfg;
    job.train = &data.train;
    job.test = &data.test;
    job.epochs = cfg.epochs;
    const auto real = peer::run_local_training(job);
    for (const auto& o : real.peers) {
        CHECK(o.error == "");
        REQUIRE(o.result);
        CHECK(o.result->steps == steps);
    }
    REQUIRE(real.loss);
    CHECK(*real.loss == loss);  // bit for bit: a synchronous protocol, the same math
}

TEST_CASE("toy_average through gossamer::Peer: user loops on different objectives agree") {
    test::TempDir dir;
    const auto path =
        dir.write("exponential.json",
                  topology::family_topology_json(exponential(), topology::LocalPeers{}).dump());
    const std::size_t size = 8;
    auto job = make_inproc_job(kPeers);
    std::vector<std::vector<float>> final(kPeers);
    std::vector<PeerMetrics> metrics(kPeers);
    std::vector<std::string> errors(kPeers);
    {
        std::vector<std::jthread> loops;
        for (int r = 0; r < kPeers; ++r)
            loops.emplace_back([&, r] {
                try {
                    PeerOptions o;
                    o.topology = path;
                    o.rank = r;
                    o.algorithm = "toy_average";
                    o.steps = 200;
                    o.transport = PeerTransport::inproc;
                    o.inproc = job;
                    std::vector<float> x(size, 0.0f);
                    Peer peer(o, x);
                    // Peer r minimises 0.5 |x - r|^2 with its own SGD step.
                    do
                        for (auto& v : x) v -= 0.05f * (v - static_cast<float>(r));
                    while (peer.step(0.0));
                    metrics[r] = peer.finish();
                    final[r] = x;
                } catch (const std::exception& e) {
                    errors[r] = e.what();
                }
            });
    }
    for (int r = 0; r < kPeers; ++r) {
        CAPTURE(r);
        REQUIRE(errors[r] == "");
        CHECK(metrics[r].algorithm == "toy_average");
        CHECK(metrics[r].steps == 200);
        CHECK(metrics[r].rounds == 200);
        // Alone each would end at r; averaging pulls all near the mean optimum, 1.5.
        for (float v : final[r]) CHECK(std::abs(v - 1.5f) < 0.3f);
    }
}
