// The all-reduce baseline in an elastic job (docs/algorithms/allreduce.md, "Elastic jobs"): the
// ring rebuilt over the live members ("elastic": "rebuild") or every member restarted from its last
// checkpoint ("restart"), in the simulator with the protocol's own code.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <string>

#include "gossamer/core/error.hpp"
#include "gossamer/core/rng.hpp"
#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/optimizers/protocols/allreduce/allreduce.hpp"
#include "gossamer/sim/setup_checks.hpp"
#include "gossamer/sim/simulation.hpp"
#include "gossamer/topology/schedule.hpp"

using namespace gossamer;

namespace {

constexpr int kPeers = 16;
constexpr Time kStep = 0.01;  // 160 steps: 1.6 s of virtual time without churn

optim::TrainingConfig logreg_config() {
    return optim::parse_training_config(json::parse_text(R"({"seed": 2,
        "data": {"name": "logreg_synthetic", "samples": 6400, "test_samples": 800, "features": 10, "seed": 4},
        "model": {"name": "softmax"}, "optimizer": {"name": "sgd", "lr": 0.2, "momentum": 0.9},
        "schedule": {"schedule": "cosine"}, "training": {"epochs": 10, "batch_size": 25}})",
                                                         "logreg.json"));
}

// Two graceful leaves (3, 9), one crash and rejoin (5, and rank 0 crashes for good), two late
// joins (14, 15).
Cluster churn_cluster() {
    Cluster c = homogeneous_cluster(kPeers, kStep, 1e-4, 1e8);
    c.source = "churn.json";
    c.peers[3].leave_at = 0.45;
    c.peers[9].leave_at = 0.85;
    c.peers[5].fail_at = 0.3;
    c.peers[5].rejoin_at = 0.7;
    c.peers[0].fail_at = 0.55;
    c.peers[14].join_at = 0.5;
    c.peers[15].join_at = 0.65;
    return c;
}

sim::SimSetup setup(const Cluster& cluster, const optim::TrainingConfig* cfg,
                    const optim::TrainingData* data, const std::string& options) {
    topology::FamilySpec fam;
    fam.family = "ring";
    fam.n = kPeers;
    fam.weights = topology::WeightRule::uniform;
    sim::SimSetup s;
    s.algorithm = "allreduce";
    s.topology = topology::generate(fam);
    s.cluster = &cluster;
    if (cfg) {
        s.config = cfg;
        s.train = &data->train;
        s.test = &data->test;
        s.epochs = cfg->epochs;
        s.eval_interval = 0.05;
    } else {
        s.mode = sim::Mode::cost;
        s.model_size = 1000;
        s.steps = 150;
    }
    s.failure_detection = 0.02;
    const auto doc = json::parse_text(options, "train.json");
    s.options = json::Node(doc).at("allreduce");
    return s;
}

}  // namespace

TEST_CASE(
    "allreduce rebuild under churn: the live members end identical, joiners are in, "
    "deterministic") {
    const auto cfg = logreg_config();
    const auto data = optim::load_training_data(cfg);
    const Cluster cluster = churn_cluster();
    const auto s = setup(cluster, &cfg, &data, R"({"allreduce": {"elastic": "rebuild"}})");
    const sim::SimResult r = sim::simulate(s);
    CHECK_FALSE(r.stopped_by_failure.has_value());
    // Every member starts each ring from the same state, so they stay bit for bit identical.
    CHECK(r.evals.back().live == kPeers - 3);  // 3 and 9 left, 0 is down
    CHECK(r.evals.back().consensus == 0.0);
    for (int leaver : {3, 9}) CHECK(r.peers[leaver].left);
    CHECK(r.peers[0].failed);
    // Each membership is a topology version, analysed (docs/operations/elastic.md): the 14 peers of
    // t = 0, then 5 crashes, 3 leaves, 14 joins, 0 crashes, 15 joins, 5 is back, 9 leaves.
    REQUIRE(r.topology_versions.size() == 8);
    CHECK(r.topology_versions[0].live.size() == kPeers - 2);
    CHECK(r.topology_versions[0].time == 0.0);
    CHECK(r.topology_versions.back().live ==
          std::vector<int>{1, 2, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15});
    for (const auto& v : r.topology_versions) {
        CAPTURE(v.line);
        CHECK(v.line.rfind(
                  fmt::format("topology version {}: {} of 16 peers live", v.version, v.live.size()),
                  0) == 0);
        CHECK(v.spectral_gap.has_value());
    }
    for (int entered : {5, 14, 15}) {
        CAPTURE(entered);
        CHECK(r.peers[entered].joins == 1);
        CHECK_FALSE(r.peers[entered].failed);
        CHECK(r.peers[entered].steps > 0);
    }
    // Little is lost: within 2 points of the same job without churn.
    const Cluster calm = homogeneous_cluster(kPeers, kStep, 1e-4, 1e8);
    auto quiet = s;
    quiet.cluster = &calm;
    const auto q = sim::simulate(quiet);
    CAPTURE(q.evals.back().accuracy);
    CAPTURE(r.evals.back().accuracy);
    CHECK(r.evals.back().accuracy > q.evals.back().accuracy - 0.02);
    CHECK(r.end_time > q.end_time);  // the abandoned all-reduces and the hand-overs cost time
    // The same seed, the same run.
    const auto again = sim::simulate(s);
    REQUIRE(again.evals.size() == r.evals.size());
    for (std::size_t i = 0; i < r.evals.size(); ++i) {
        CHECK(again.evals[i].accuracy == r.evals[i].accuracy);
        CHECK(again.evals[i].bytes == r.evals[i].bytes);
    }
    CHECK(again.events == r.events);
}

TEST_CASE("allreduce restart under churn: every change rolls the job back to its checkpoint") {
    const auto cfg = logreg_config();
    const auto data = optim::load_training_data(cfg);
    const Cluster cluster = churn_cluster();
    const auto rebuild =
        sim::simulate(setup(cluster, &cfg, &data, R"({"allreduce": {"elastic": "rebuild"}})"));
    const auto restart = sim::simulate(setup(
        cluster, &cfg, &data,
        R"({"allreduce": {"elastic": "restart", "checkpoint_every": 40, "restart_seconds": 0.1}})"));
    CHECK_FALSE(restart.stopped_by_failure.has_value());
    CHECK(restart.evals.back().consensus == 0.0);
    CHECK(restart.evals.back().live == kPeers - 3);
    // Seven changes (two leaves, two crashes, a rejoin, two joins), each at least 0.1 s of
    // restart and the steps since the last checkpoint again: the job ends later.
    CAPTURE(rebuild.end_time);
    CAPTURE(restart.end_time);
    CHECK(restart.end_time > rebuild.end_time + 0.5);
    // Compute spent includes the steps done again after each rollback.
    double busy_rebuild = 0, busy_restart = 0;
    for (int q = 0; q < kPeers; ++q) {
        busy_rebuild += rebuild.peers[q].busy;
        busy_restart += restart.peers[q].busy;
    }
    CHECK(busy_restart > busy_rebuild);
}

TEST_CASE("allreduce with a rebuilt ring survives failures that stop it by default") {
    Cluster cluster = homogeneous_cluster(kPeers, kStep, 1e-4, 1e8);
    cluster.peers[0].fail_at = 0.3;  // the leader of the first ring
    cluster.peers[7].fail_at = 0.31;
    cluster.peers[8].fail_at = 0.8;
    const auto stop = sim::simulate(setup(cluster, nullptr, nullptr, R"({"allreduce": {}})"));
    CHECK(stop.stopped_by_failure.has_value());
    const auto r =
        sim::simulate(setup(cluster, nullptr, nullptr, R"({"allreduce": {"elastic": "rebuild"}})"));
    CHECK_FALSE(r.stopped_by_failure.has_value());
    for (int q = 0; q < kPeers; ++q) {
        CAPTURE(q);
        CHECK(r.peers[q].failed == (q == 0 || q == 7 || q == 8));
    }
}

TEST_CASE("random churn schedules: allreduce rebuild and restart never stall") {
    // 30 seeded schedules over 16 peers of 10 ms steps, as sim_churn's: rank 0 too may crash;
    // failures heard of after 2 and after 30 steps.
    for (std::uint64_t seed = 1; seed <= 30; ++seed) {
        Rng rng(seed);
        Cluster cluster = homogeneous_cluster(kPeers, kStep, 1e-4, 1e8);
        for (int r = 0; r < kPeers; ++r) {
            PeerSpec& p = cluster.peers[static_cast<std::size_t>(r)];
            const auto kind = rng.below(6);
            const double a = 0.05 + 1.2 * rng.uniform(), b = a + 0.05 + 0.3 * rng.uniform();
            if (r > 0 && kind == 0) p.join_at = a;
            if (kind == 1) p.leave_at = a;
            if (kind == 2) p.fail_at = a, p.rejoin_at = b;
            if (r > 0 && kind == 3) p.join_at = a, p.leave_at = b;
        }
        // A slow detection (30 steps) lets a failed leader rejoin before the others hear of its
        // failure, and failures pile up while a ring is proposed.
        for (const double detection : {0.02, 0.3})
            for (const char* options :
                 {R"({"allreduce": {"elastic": "rebuild"}})",
                  R"({"allreduce": {"elastic": "restart", "checkpoint_every": 20}})"}) {
                CAPTURE(seed);
                CAPTURE(detection);
                CAPTURE(options);
                auto s = setup(cluster, nullptr, nullptr, options);
                s.failure_detection = detection;
                sim::SimResult r;
                REQUIRE_NOTHROW(r = sim::simulate(s));
                for (int q = 0; q < kPeers; ++q) {
                    const PeerSpec& p = cluster.peers[static_cast<std::size_t>(q)];
                    CAPTURE(q);
                    CHECK(r.peers[q].joins == (p.join_at > 0) + (p.rejoin_at < 10));
                }
            }
    }
}

TEST_CASE("allreduce's membership options: bad values are one line") {
    const Cluster cluster = churn_cluster();
    const auto bad = [&](const char* options, const std::string& want) {
        CAPTURE(options);
        try {
            sim::simulate(setup(cluster, nullptr, nullptr, options));
            FAIL("no error");
        } catch (const ConfigError& e) {
            const std::string msg = e.what();
            CHECK(msg.find('\n') == std::string::npos);
            CHECK(msg.find(want) != std::string::npos);
        }
    };
    bad(R"({"allreduce": {"elastic": "regrow"}})", "allreduce.elastic");
    bad(R"({"allreduce": {"elastic": "rebuild", "checkpoint_every": 5}})",
        "allreduce.checkpoint_every: applies to \"elastic\": \"restart\" only");
    bad(R"({"allreduce": {"elastic": "restart", "restart_seconds": -1}})",
        "allreduce.restart_seconds: -1 is out of range");
    bad(R"({"allreduce": {"elastic": "restart", "checkpoint_every": 0}})",
        "allreduce.checkpoint_every");
    // The default stops on a failure, so a churning cluster is refused before anything runs.
    bad(R"({"allreduce": {}})",
        "churn.json: peers: algorithm allreduce stops when a peer fails or leaves unless its "
        "options say otherwise; set \"elastic\": \"rebuild\"");
}
