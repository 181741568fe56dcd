// Elastic jobs in the simulator (docs/operations/elastic.md): peers join late, leave gracefully,
// crash and rejoin, under async, with the push-sum mass exact but for what the crash took.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "gossamer/core/error.hpp"
#include "gossamer/core/rng.hpp"
#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/sim/setup_checks.hpp"
#include "gossamer/sim/simulation.hpp"
#include "gossamer/topology/schedule.hpp"

using namespace gossamer;

namespace {

constexpr int kPeers = 16;
constexpr Time kStep = 0.01;  // seconds per local step: 160 steps, 1.6 s of virtual time

optim::TrainingConfig logreg_config() {
    return optim::parse_training_config(json::parse_text(R"({"seed": 2,
        "data": {"name": "logreg_synthetic", "samples": 6400, "test_samples": 800, "features": 10, "seed": 4},
        "model": {"name": "softmax"}, "optimizer": {"name": "sgd", "lr": 0.2},
        "schedule": {"schedule": "cosine"}, "training": {"epochs": 10, "batch_size": 25}})",
                                                         "logreg.json"));
}

// Two graceful leaves (3, 9), one crash and rejoin (5), two late joins (14, 15).
Cluster churn_cluster() {
    Cluster c = homogeneous_cluster(kPeers, kStep, 1e-4, 1e8);
    c.source = "churn.json";
    c.peers[3].leave_at = 0.45;
    c.peers[9].leave_at = 0.85;
    c.peers[5].fail_at = 0.3;
    c.peers[5].rejoin_at = 0.7;
    c.peers[14].join_at = 0.5;
    c.peers[15].join_at = 0.65;
    return c;
}

sim::SimSetup setup(const std::string& algorithm, const Cluster& cluster,
                    const optim::TrainingConfig& cfg, const optim::TrainingData& data) {
    topology::FamilySpec fam;
    fam.family = "exponential";
    fam.n = kPeers;
    fam.weights = topology::WeightRule::uniform;
    sim::SimSetup s;
    s.algorithm = algorithm;
    s.topology = topology::generate(fam);
    s.cluster = &cluster;
    s.config = &cfg;
    s.train = &data.train;
    s.test = &data.test;
    s.epochs = cfg.epochs;
    s.eval_interval = 0.05;
    s.failure_detection = 0.02;
    s.peer_distances = true;
    return s;
}

// The first evaluation at or after `t`.
const sim::EvalPoint& at_or_after(const sim::SimResult& r, Time t) {
    for (const auto& e : r.evals)
        if (e.time >= t) return e;
    return r.evals.back();
}

// A peer that entered (5 rejoins, 14 and 15 join) is a live member within 5 steps of its time
// (its sponsor answers at a step end, one transfer) and, 30 steps later, within 2x the others'
// mean distance to the live mean.
void check_entries(const sim::SimResult& r, const Cluster& cluster) {
    for (int entered : {5, 14, 15}) {
        CAPTURE(entered);
        const Time t = entered == 5 ? cluster.peers[5].rejoin_at : cluster.peers[entered].join_at;
        CHECK(at_or_after(r, t + 5 * kStep).distance[entered] >= 0);
        const auto& e = at_or_after(r, t + 30 * kStep);
        double others = 0;
        int count = 0;
        for (int q = 0; q < kPeers; ++q)
            if (q != 5 && q != 14 && q != 15 && e.distance[q] >= 0) {
                others += e.distance[q];
                ++count;
            }
        REQUIRE(count > 0);
        others /= count;
        CAPTURE(e.time);
        CAPTURE(e.distance[entered]);
        CAPTURE(others);
        CHECK(e.distance[entered] >= 0);
        CHECK(e.distance[entered] <= 2 * others);
    }
    CHECK(r.evals.back().live == kPeers - 2);
    CHECK(r.peers[0].joins == 0);
    for (int entered : {5, 14, 15}) {
        CAPTURE(entered);
        CHECK(r.peers[entered].joins == 1);
        CHECK_FALSE(r.peers[entered].failed);
        CHECK(r.peers[entered].steps > 0);
    }
}

// Churn costs little: the final accuracy is within 2 points of the same job without it.
void check_accuracy(const sim::SimResult& r, const sim::SimSetup& s) {
    const Cluster calm = homogeneous_cluster(kPeers, kStep, 1e-4, 1e8);
    auto quiet = s;
    quiet.cluster = &calm;
    const double reference = sim::simulate(quiet).evals.back().accuracy;
    CAPTURE(reference);
    CHECK(r.evals.back().accuracy > reference - 0.02);
}

// The same seed gives the same results, to the bit.
void check_same(const sim::SimResult& r, const sim::SimResult& again) {
    REQUIRE(again.evals.size() == r.evals.size());
    for (std::size_t i = 0; i < r.evals.size(); ++i) {
        CHECK(again.evals[i].time == r.evals[i].time);
        CHECK(again.evals[i].accuracy == r.evals[i].accuracy);
        CHECK(again.evals[i].consensus == r.evals[i].consensus);
        CHECK(again.evals[i].bytes == r.evals[i].bytes);
        CHECK(again.evals[i].distance == r.evals[i].distance);
    }
    for (int q = 0; q < kPeers; ++q) {
        CHECK(again.peers[q].bytes_sent == r.peers[q].bytes_sent);
        CHECK(again.peers[q].mass == r.peers[q].mass);
        CHECK(again.peers[q].steps == r.peers[q].steps);
    }
    CHECK(again.crash_loss == r.crash_loss);
    CHECK(again.events == r.events);
}

}  // namespace

TEST_CASE(
    "async under churn: mass exact but for the crash, joiners reach consensus, "
    "deterministic") {
    const auto cfg = logreg_config();
    const auto data = optim::load_training_data(cfg);
    const Cluster cluster = churn_cluster();
    const auto s = setup("async", cluster, cfg, data);
    const sim::SimResult r = sim::simulate(s);

    // Mass: n = survivors' sum w + what the crash took, which the simulator measured itself.
    CAPTURE(r.mass);
    CAPTURE(r.crash_loss);
    CHECK(r.crash_loss > 0.01);
    // The job's mass is one per peer at t = 0: joiners take theirs from a sponsor.
    CHECK(r.mass_start == kPeers - 2);
    CHECK(std::abs(r.mass_start - r.mass - r.crash_loss) < 1e-9);
    CHECK(std::abs(r.mass_lost - r.crash_loss) < 1e-9);
    double sum = 0;
    for (const auto& p : r.peers) sum += p.mass;
    CHECK(std::abs(sum - r.mass) < 1e-9);
    // The leavers handed everything on; everybody is a member at the end.
    for (int leaver : {3, 9}) {
        CAPTURE(leaver);
        CHECK(r.peers[leaver].left);
        CHECK(r.peers[leaver].mass == 0.0);
        CHECK(r.peers[leaver].steps < r.peers[0].steps);
    }
    for (int entered : {5, 14, 15}) CHECK(r.peers[entered].mass > 0);
    check_entries(r, cluster);
    check_accuracy(r, s);
    check_same(r, sim::simulate(s));
}

TEST_CASE(
    "dpsgd under churn: joiners copy their sponsor's model, leavers' weight moves to the "
    "others' own, deterministic") {
    const auto cfg = logreg_config();
    const auto data = optim::load_training_data(cfg);
    const Cluster cluster = churn_cluster();
    const auto s = setup("dpsgd", cluster, cfg, data);
    const sim::SimResult r = sim::simulate(s);
    for (int leaver : {3, 9}) {
        CAPTURE(leaver);
        CHECK(r.peers[leaver].left);
        CHECK(r.peers[leaver].steps < r.peers[0].steps);
    }
    CHECK(r.peers[0].steps == 160);
    // Entered at their sponsor's round (plus 2): they work only the job's remaining steps.
    for (int entered : {5, 14, 15}) CHECK(r.peers[entered].busy < r.peers[0].busy);
    check_entries(r, cluster);
    check_accuracy(r, s);
    check_same(r, sim::simulate(s));

    // Options dpsgd cannot combine with churn yet are one line before anything runs.
    auto delayed = s;
    const auto options = json::parse_text(R"({"algorithms": {"dpsgd": {"delay": 1}}})", "o.json");
    delayed.options = gossamer::json::Node(options).at("algorithms").at("dpsgd");
    CHECK_THROWS_WITH_AS(sim::check_sizes(delayed, 10, {"train.json", ""}),
                         "train.json: algorithms.dpsgd.delay: algorithm dpsgd with delay cannot "
                         "join, leave or rejoin a running job yet, and the cluster churn.json has "
                         "churn; drop \"delay\", or the cluster's join_at, leave_at and rejoin_at "
                         "(docs/operations/elastic.md)",
                         ConfigError);
    CHECK_THROWS_WITH_AS(sim::simulate(delayed),
                         doctest::Contains("algorithm dpsgd with delay 1 cannot join, leave or "
                                           "rejoin a running job yet"),
                         ConfigError);
}

TEST_CASE("async under churn in cost mode: the mass is exact too") {
    const Cluster cluster = churn_cluster();
    topology::FamilySpec fam;
    fam.family = "ring";
    fam.n = kPeers;
    fam.weights = topology::WeightRule::uniform;
    sim::SimSetup s;
    s.algorithm = "async";
    s.topology = topology::generate(fam);
    s.cluster = &cluster;
    s.mode = sim::Mode::cost;
    s.model_size = 1000;
    s.steps = 150;
    s.failure_detection = 0.02;
    const auto r = sim::simulate(s);
    CHECK(r.crash_loss > 0);
    CHECK(std::abs(kPeers - 2 - r.mass - r.crash_loss) < 1e-9);
    CHECK(r.peers[3].mass == 0.0);
    CHECK(r.peers[14].joins == 1);
}

TEST_CASE("a churning cluster under an algorithm that cannot follow it is one line") {
    const Cluster cluster = churn_cluster();
    topology::FamilySpec fam;
    fam.family = "ring";
    fam.n = kPeers;
    fam.weights = topology::WeightRule::uniform;
    for (const char* algo : {"sgp", "choco"}) {
        CAPTURE(algo);
        sim::SimSetup s;
        s.algorithm = algo;
        s.topology = topology::generate(fam);
        s.cluster = &cluster;
        s.mode = sim::Mode::cost;
        s.model_size = 10;
        s.steps = 5;
        try {
            sim::check_sizes(s, 10, {});
            FAIL("no error");
        } catch (const ConfigError& e) {
            const std::string msg = e.what();
            CHECK(msg.find('\n') == std::string::npos);
            CHECK(msg.rfind(std::string("churn.json: peers: algorithm ") + algo +
                                " cannot join, leave or rejoin a running job yet",
                            0) == 0);
        }
        CHECK_THROWS_AS(sim::simulate(s), ConfigError);
    }
    // allreduce follows churn only with "elastic" in its options (sim_churn_allreduce).
}

TEST_CASE("a crash under sgp and async without churn: the measured loss is exactly the mass gone") {
    Cluster cluster = homogeneous_cluster(kPeers, kStep, 1e-4, 1e8);
    cluster.peers[6].fail_at = 0.5;
    for (const char* algo : {"sgp", "async"}) {
        CAPTURE(algo);
        topology::FamilySpec fam;
        fam.family = std::string(algo) == "sgp" ? "one_peer_exponential" : "exponential";
        fam.n = kPeers;
        fam.weights = std::string(algo) == "sgp" ? topology::WeightRule::push_sum
                                                 : topology::WeightRule::uniform;
        sim::SimSetup s;
        s.algorithm = algo;
        s.topology = topology::generate(fam);
        s.cluster = &cluster;
        s.mode = sim::Mode::cost;
        s.model_size = 100;
        s.steps = 120;
        s.failure_detection = 0.03;
        const auto r = sim::simulate(s);
        CAPTURE(r.crash_loss);
        CHECK(r.mass_start == kPeers);
        CHECK(r.crash_loss > 0.5);
        CHECK(std::abs(r.mass_lost - r.crash_loss) < 1e-9);
        CHECK(r.peers[6].failed);
    }
}

TEST_CASE("random churn schedules: async keeps its mass exact, async and dpsgd never stall") {
    // 40 seeded schedules over 16 peers of 10 ms steps (150 steps, 1.5 s): each peer but rank 0
    // joins late, leaves, crashes and rejoins, or joins and leaves with probability 1/6 each, at
    // random times.
    for (std::uint64_t seed = 1; seed <= 40; ++seed) {
        Rng rng(seed);
        Cluster cluster = homogeneous_cluster(kPeers, kStep, 1e-4, 1e8);
        for (int r = 1; r < kPeers; ++r) {  // rank 0 always starts
            PeerSpec& p = cluster.peers[static_cast<std::size_t>(r)];
            const auto kind = rng.below(6);
            const double a = 0.05 + 1.2 * rng.uniform(), b = a + 0.05 + 0.3 * rng.uniform();
            if (kind == 0) p.join_at = a;
            if (kind == 1) p.leave_at = a;
            if (kind == 2) p.fail_at = a, p.rejoin_at = b;
            if (kind == 3) p.join_at = a, p.leave_at = b;
        }
        for (const char* algo : {"async", "dpsgd"}) {
            CAPTURE(seed);
            CAPTURE(algo);
            topology::FamilySpec fam;
            fam.family = "exponential";
            fam.n = kPeers;
            fam.weights = topology::WeightRule::uniform;
            sim::SimSetup s;
            s.algorithm = algo;
            s.topology = topology::generate(fam);
            s.cluster = &cluster;
            s.mode = sim::Mode::cost;
            s.model_size = 100;
            s.steps = 150;
            s.failure_detection = 0.02;
            sim::SimResult r;
            REQUIRE_NOTHROW(r = sim::simulate(s));
            if (std::string(algo) == "async")
                CHECK(std::abs(r.mass_start - r.mass - r.crash_loss) < 1e-9);
            for (int q = 0; q < kPeers; ++q) {
                const PeerSpec& p = cluster.peers[static_cast<std::size_t>(q)];
                CAPTURE(q);
                // A peer that finished its steps before its leave_at did not need to leave.
                if (r.peers[q].left) CHECK(p.leave_at < 10);
                if (r.peers[q].left && std::string(algo) == "async") CHECK(r.peers[q].mass == 0);
                CHECK(r.peers[q].joins == (p.join_at > 0) + (p.rejoin_at < 10));
            }
        }
    }
}
