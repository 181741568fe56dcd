// Elastic join under "outer" in the simulator (docs/operations/elastic.md, "Under outer"): async
// (Elastic::always) with Nesterov outer rounds on a churning 4-peer cluster (churn4's events):
// a joiner enters at its sponsor's round with the inner step count of that round (round x H),
// takes the job's remaining rounds once each with the right number of inner steps, the job
// ends, and the joiners' anchors stay near the others'. The trace's rounds are the record.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <string>

#include "gossamer/core/trace.hpp"
#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/sim/simulation.hpp"
#include "gossamer/topology/schedule.hpp"
#include "support/temp_dir.hpp"

using namespace gossamer;

namespace {

constexpr int kPeers = 4;
constexpr Time kStep = 0.01;
constexpr std::int64_t kH = 4;

optim::TrainingConfig config() {
    return optim::parse_training_config(json::parse_text(R"({"seed": 2,
        "data": {"name": "logreg_synthetic", "samples": 1600, "test_samples": 400, "features": 10, "seed": 4},
        "model": {"name": "softmax"}, "optimizer": {"name": "sgd", "lr": 0.2, "momentum": 0.5},
        "schedule": {"schedule": "cosine"}, "training": {"epochs": 10, "batch_size": 25},
        "outer": {"steps": 4, "optimizer": "nesterov", "lr": 0.7, "momentum": 0.9}})",
                                                         "outer_churn.json"));
}

// churn4's events, scaled to this job's 160 inner steps (1.6 s): rank 3 joins at 0.5 s, rank 2
// crashes at 0.7 s and rejoins at 1.0 s.
Cluster churn_cluster(bool churn) {
    Cluster c = homogeneous_cluster(kPeers, kStep, 1e-5, 1.25e9);
    c.source = "churn4.json";
    if (!churn) return c;
    c.peers[3].join_at = 0.5;
    c.peers[2].fail_at = 0.7;
    c.peers[2].rejoin_at = 1.0;
    return c;
}

sim::SimSetup setup(const Cluster& cluster, const optim::TrainingConfig& cfg,
                    const optim::TrainingData& data, trace::Recorder* rec) {
    topology::FamilySpec fam;
    fam.family = "ring";
    fam.n = kPeers;
    fam.weights = topology::WeightRule::uniform;
    sim::SimSetup s;
    s.algorithm = "async";
    s.topology = topology::generate(fam);
    s.cluster = &cluster;
    s.config = &cfg;
    s.train = &data.train;
    s.test = &data.test;
    s.epochs = cfg.epochs;
    s.eval_interval = 0.05;
    s.failure_detection = 0.02;
    s.peer_distances = true;
    s.trace = rec;
    return s;
}

struct Round {
    std::int64_t round = 0, steps = 0, first = -1, last = -1, count = 0;
};

// Per peer: its rounds in order, each with its inner steps (first, last, how many).
std::map<int, std::vector<Round>> rounds_of(const std::string& path) {
    const auto doc = json::load_file(path);
    std::map<int, std::vector<Round>> out;
    for (const auto& e : (*doc.root)["traceEvents"]) {
        const std::string cat = e.value("cat", "");
        if (cat == "round") {
            CHECK(e["args"]["H"].get<std::int64_t>() == kH);
            out[e["pid"].get<int>()].push_back(
                {e["args"]["round"].get<std::int64_t>(), e["args"]["steps"].get<std::int64_t>()});
        } else if (cat == "step") {
            auto& r = out[e["pid"].get<int>()].back();  // its round came first
            REQUIRE(e["args"]["round"].get<std::int64_t>() == r.round);
            const auto step = e["args"]["step"].get<std::int64_t>();
            if (r.first < 0) r.first = step;
            CHECK(step == r.first + r.count);  // contiguous
            r.last = step;
            ++r.count;
        }
    }
    return out;
}

}  // namespace

TEST_CASE("async under outer on a churning cluster: joiners enter at their sponsor's round") {
    const auto cfg = config();
    const auto data = optim::load_training_data(cfg);
    const Cluster cluster = churn_cluster(true);
    test::TempDir dir;
    trace::Recorder rec("virtual", 64'000'000);
    const auto r = sim::simulate(setup(cluster, cfg, data, &rec));
    const auto path = dir.path() / "trace.json";
    rec.write(path.string());
    REQUIRE(rec.every() == 1);  // nothing sampled away

    // 1600 / 4 / 25 x 10 = 160 inner steps per peer: 40 rounds of 4.
    const std::int64_t total = 160, rounds = 40;
    const auto per_peer = rounds_of(path.string());
    REQUIRE(per_peer.size() == kPeers);
    for (const auto& [rank, rs] : per_peer) {
        CAPTURE(rank);
        REQUIRE(!rs.empty());
        int cut = 0;  // rounds a crash cut short (rank 2's, at 0.7 s)
        for (std::size_t i = 0; i < rs.size(); ++i) {
            const Round& x = rs[i];
            CAPTURE(x.round);
            // Inner steps and rounds agree: round r starts at inner step r x H and takes
            // min(H, T - r H) steps, all of them traced.
            CHECK(x.first == x.round * kH);
            const std::int64_t want = std::min(kH, total - x.round * kH);
            if (rank == 2 && x.steps < want && i + 1 < rs.size() && ++cut == 1) {
                CHECK(x.steps > 0);  // the crash came inside it
            } else {
                CHECK(x.steps == want);
            }
            CHECK(x.count == x.steps);
            // One round after the other, none twice (a rejoin continues at its sponsor's).
            if (i > 0 && rank != 2) CHECK(x.round == rs[i - 1].round + 1);
            if (i > 0) CHECK(x.round > rs[i - 1].round);
        }
        CHECK(cut == (rank == 2 ? 1 : 0));
        CHECK(rs.back().round == rounds - 1);  // every peer ends the job's last round
        CHECK(rs.back().last == total - 1);
        CHECK(r.peers[static_cast<std::size_t>(rank)].steps > 0);
        CHECK_FALSE(r.peers[static_cast<std::size_t>(rank)].failed);
    }
    // The joiner entered late: its first round is its sponsor's, well past 0 (0.5 s of 1.6 s).
    const auto& joiner = per_peer.at(3);
    CAPTURE(joiner.front().round);
    CHECK(joiner.front().round >= 8);
    CHECK(joiner.size() == static_cast<std::size_t>(rounds - joiner.front().round));
    CHECK(r.peers[3].joins == 1);
    CHECK(r.peers[2].joins == 1);

    // The job ends and the anchors stay together: the joiners' distance to the live mean at the
    // end is within 3x the others', and the consensus distance no more than 3x the calm job's.
    const auto& last = r.evals.back();
    CHECK(last.live == kPeers);
    CHECK(std::isfinite(last.accuracy));
    const double others = (last.distance[0] + last.distance[1]) / 2;
    CAPTURE(others);
    CAPTURE(last.distance[2]);
    CAPTURE(last.distance[3]);
    CHECK(last.distance[2] <= 3 * others + 1e-6);
    CHECK(last.distance[3] <= 3 * others + 1e-6);
    const Cluster calm = churn_cluster(false);
    const auto quiet = sim::simulate(setup(calm, cfg, data, nullptr));
    CAPTURE(quiet.evals.back().consensus);
    CAPTURE(last.consensus);
    CHECK(last.consensus <= 3 * quiet.evals.back().consensus + 1e-6);
    CHECK(last.accuracy > quiet.evals.back().accuracy - 0.03);
}
