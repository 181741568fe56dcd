// lsgd, gadmm and qallreduce where the other protocols run: gossamer sim (same seed, same
// bytes), real-time inproc peers (the loss of sim, bit for bit: all three are synchronous),
// gossamer::Peer, and bad options at the command line (one line, exit 2).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "gossamer/core/cluster.hpp"
#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/optimizers/local/training_worker.hpp"
#include "gossamer/peer/local.hpp"
#include "gossamer/sim/simulation.hpp"
#include "peer/api_peers.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

using namespace gossamer;

namespace {

const std::string kBin = GOSSAMER_BINARY;

optim::TrainingConfig logreg_config() {
    return optim::parse_training_config(json::parse_text(R"({"seed": 2,
        "data": {"name": "logreg_synthetic", "samples": 1600, "test_samples": 400, "features": 10, "seed": 4},
        "model": {"name": "softmax"}, "optimizer": {"name": "sgd", "lr": 0.2},
        "schedule": {"schedule": "cosine"}, "training": {"epochs": 3, "batch_size": 20},
        "algorithms": {"lsgd": {"pull": 0.3}, "gadmm": {"rho": 0.5, "local_steps": 2},
                       "qallreduce": {"compressor": {"name": "int8", "block": 32}}}})",
                                                         "logreg.json"));
}

std::shared_ptr<const topology::Schedule> ring(int n) {
    topology::FamilySpec f;
    f.family = "ring";
    f.n = n;
    return topology::generate(f);
}

}  // namespace

TEST_CASE(
    "lsgd, gadmm and qallreduce: inproc peers end with the loss of gossamer sim, bit for bit") {
    const auto cfg = logreg_config();
    const auto data = optim::load_training_data(cfg);
    const int n = 4;
    for (const std::string algorithm : {"dpsgd", "allreduce", "lsgd", "gadmm", "qallreduce"}) {
        CAPTURE(algorithm);
        const auto cluster = homogeneous_cluster(n, 0.01, 1e-5, 1e9);
        sim::SimSetup s;
        s.algorithm = algorithm;
        s.topology = ring(n);
        s.cluster = &cluster;
        s.config = &cfg;
        s.options = cfg.algorithm_options(algorithm);
        s.train = &data.train;
        s.test = &data.test;
        s.epochs = cfg.epochs;
        const double reference = sim::simulate(s).evals.back().loss;

        peer::LocalTraining job;
        job.algorithm = algorithm;
        job.algorithm_options = s.options ? &*s.options : nullptr;
        job.topology = ring(n);
        job.config = &cfg;
        job.train = &data.train;
        job.test = &data.test;
        job.epochs = cfg.epochs;
        const auto res = peer::run_local_training(job);
        for (const auto& o : res.peers) REQUIRE(o.error == "");
        REQUIRE(res.loss);
        CAPTURE(reference);
        CAPTURE(*res.loss);
        CHECK(*res.loss < 0.9 * std::log(2.0));
        CHECK(*res.loss == reference);
    }
}

TEST_CASE("lsgd, gadmm and qallreduce run under gossamer::Peer") {
    test::TempDir dir;
    const int n = 4;
    const auto path = api_test::topology_file(dir, "ring", n, topology::WeightRule::uniform);
    const auto cfg = logreg_config();
    const auto data = optim::load_training_data(cfg);
    for (const char* algorithm : {"lsgd", "gadmm", "qallreduce"}) {
        CAPTURE(std::string(algorithm));
        auto job = make_inproc_job(n);
        const auto out = api_test::run_loops(n, [&](int r, api_test::LoopOutcome& me) {
            auto w = optim::make_training_worker(cfg, data.train, r, n, cfg.epochs);
            auto& trainer = *w.trainer;
            std::vector<float> p(trainer.params().begin(), trainer.params().end());
            Peer peer(api_test::inproc_options(path, r, algorithm, w.steps, job), p);
            double loss = 0;
            do {
                loss = trainer.compute_gradient(p);
                trainer.apply_gradient(p, trainer.gradient());
            } while (peer.step(loss));
            me.metrics = peer.finish();
            me.params = p;
        });
        for (const auto& o : out) {
            REQUIRE(o.error == "");
            CHECK(o.metrics.finished);
            CHECK(o.metrics.bytes_sent > 0);
            for (float v : o.params) CHECK(std::isfinite(v));
        }
        // The user's models learned, and agree about as well as the built-in peers' do.
        const auto model = optim::build_model(cfg, data.train);
        double loss = 0, spread = 0;
        for (const auto& o : out) {
            loss += model->evaluate(o.params, data.test, 1000).loss / n;
            for (std::size_t k = 0; k < o.params.size(); ++k)
                spread = std::max(spread, std::abs(double(o.params[k]) - out[0].params[k]));
        }
        MESSAGE(std::string(algorithm)
                << ": mean loss " << loss << ", largest difference " << spread);
        CHECK(loss < 0.9 * std::log(2.0));
    }
}

namespace {

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

struct CliJob {
    test::TempDir dir;
    std::string ring, exp, cluster;
    CliJob() {
        ring = dir.write("ring4.json", R"({"peers": {"count": 4}, "graph": {"family": "ring"}})");
        exp = dir.write("exp4.json",
                        R"({"peers": {"count": 4}, "graph": {"family": "one_peer_exponential"}})");
        cluster = dir.write("cluster.json", R"({"defaults": {"base_time": 0.01},
            "peers": [{"rank": 1, "factor": 2}], "network": {"latency": 1e-4, "bandwidth": 1e8}})");
    }
    std::string config(const std::string& algorithms) {
        return dir.write("train.json", R"({"seed": 3,
            "data": {"name": "logreg_synthetic", "samples": 800, "test_samples": 200, "features": 10, "seed": 5},
            "model": {"name": "softmax"}, "optimizer": {"name": "sgd", "lr": 0.2},
            "training": {"epochs": 2, "batch_size": 20}, "algorithms": )" +
                                           algorithms + "}");
    }
    test::RunResult sim(const std::string& topology, const std::string& config,
                        const std::string& extra) {
        return test::run(kBin + " sim --topology " + topology + " --cluster " + cluster +
                         " --config " + config + " " + extra);
    }
};

}  // namespace

TEST_CASE("gossamer sim: lsgd, gadmm and qallreduce write the same bytes for the same seed") {
    CliJob job;
    const auto cfg = job.config("{}");
    const auto a = (job.dir.path() / "a").string(), b = (job.dir.path() / "b").string();
    const std::string algos = "--algorithms lsgd,gadmm,qallreduce --out ";
    const auto ra = job.sim(job.ring, cfg, algos + a);
    CAPTURE(ra.err);
    REQUIRE(ra.status == 0);
    REQUIRE(job.sim(job.ring, cfg, algos + b).status == 0);
    for (const char* algorithm : {"lsgd", "gadmm", "qallreduce"}) {
        CAPTURE(std::string(algorithm));
        const std::string dir = std::string("/") + algorithm + "/seed0/";
        const auto m = slurp(a + dir + "metrics.jsonl");
        CHECK(m.size() > 0);
        CHECK(m == slurp(b + dir + "metrics.jsonl"));
        CHECK(slurp(a + dir + "peers.jsonl") == slurp(b + dir + "peers.jsonl"));
    }
}

TEST_CASE("gossamer sim: bad options of lsgd, gadmm and qallreduce are one line and exit 2") {
    CliJob job;
    struct Case {
        const char* algorithm;
        const char* options;
        const char* says;
    };
    for (const Case c :
         {Case{"lsgd", R"({"lsgd": {"pull": 2}})", "pull"},
          Case{"lsgd", R"({"lsgd": {"leader": "global"}})", "leader"},
          Case{"gadmm", R"({"gadmm": {"rho": 0}})", "rho"},
          Case{"gadmm", R"({"gadmm": {"local_steps": 0}})", "local_steps"},
          Case{"qallreduce", R"({"qallreduce": {"compressor": {"name": "int3"}}})", "int3"},
          Case{"qallreduce", R"({"qallreduce": {"error_feedback": "yes"}})", "error_feedback"}}) {
        CAPTURE(std::string(c.options));
        const auto r = job.sim(job.ring, job.config(c.options),
                               std::string("--algorithms ") + c.algorithm + " --out " +
                                   (job.dir.path() / "o").string());
        CAPTURE(r.err);
        CHECK(r.status == 2);
        CHECK(r.err.find(c.says) != std::string::npos);
        CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    }
    const auto r = job.sim(job.exp, job.config("{}"),
                           "--algorithms gadmm --out " + (job.dir.path() / "p").string());
    CAPTURE(r.err);
    CHECK(r.status == 2);
    CHECK(r.err.find("gadmm needs a chain") != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}
