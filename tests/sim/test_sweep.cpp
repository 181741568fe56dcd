// gossamer sim's sweep (gossamer/sim/sweep.hpp): the statistics over seeds and the runs' files.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <vector>

#include "gossamer/sim/sweep.hpp"
#include "gossamer/topology/schedule.hpp"
#include "support/temp_dir.hpp"

using namespace gossamer;

namespace {

// A run of two peers: `times[i]` reaches accuracy `acc[i]` (and the peers' mean that minus 0.05).
sim::SimResult run_with(const std::vector<double>& times, const std::vector<double>& acc) {
    sim::SimResult r;
    for (std::size_t i = 0; i < times.size(); ++i) {
        sim::EvalPoint e;
        e.time = times[i];
        e.accuracy = acc[i];
        e.mean_accuracy = acc[i] - 0.05;
        e.bytes = 4'000'000 * (i + 1);
        r.evals.push_back(e);
    }
    r.peers.resize(2);
    r.peers[0].bytes_sent = 2'000'000;
    r.peers[1].bytes_sent = 4'000'000;
    r.peers[0].idle_share = 0.1;
    r.peers[1].idle_share = 0.3;
    r.end_time = times.empty() ? 1 : times.back();
    return r;
}

}  // namespace

TEST_CASE("sweep statistics: the mean and half the range over seeds, nearest-rank quantiles") {
    CHECK(sim::stat_of({}).count == 0);
    const auto s = sim::stat_of({1, 3, 2});
    CHECK(s.count == 3);
    CHECK(s.mean == doctest::Approx(2));
    CHECK(s.spread == doctest::Approx(1));
    std::vector<double> v = {5, 1, 4, 2, 3};
    CHECK(sim::nearest_rank_quantile(v, 0.5) == 3);
    CHECK(sim::nearest_rank_quantile(v, 0.9) == 5);
    CHECK(sim::nearest_rank_quantile(v, 0.2) == 1);
    std::vector<double> none;
    CHECK(sim::nearest_rank_quantile(none, 0.5) == 0);
}

TEST_CASE("sweep statistics: the time to target counts only when every seed reached it") {
    SUBCASE("every seed reached it") {
        sim::SweepStats stats("dpsgd", 0.8);
        stats.add(run_with({1, 2, 3}, {0.5, 0.9, 0.95}));
        stats.add(run_with({1, 2, 3}, {0.5, 0.7, 0.9}));
        const auto s = stats.summary();
        CHECK(s.seeds == 2);
        CHECK(s.reached == 2);
        CHECK(s.all_reached());
        CHECK(s.time_to_target.mean == doctest::Approx(2.5));
        CHECK(s.time_to_target.spread == doctest::Approx(0.5));
        CHECK(s.mb_sent_per_peer.mean == doctest::Approx(3));
        CHECK(s.idle_share.mean == doctest::Approx(0.2));
        CHECK(s.final_accuracy.mean == doctest::Approx(0.925));
        const auto j = sim::to_json(s);
        CHECK(j["algorithm"] == "dpsgd");
        CHECK(j["time_to_target"].get<double>() == doctest::Approx(2.5));
        // The peers' mean reaches 0.8 at 2 and at 3.
        CHECK(j["time_to_target_peer_mean"].get<double>() == doctest::Approx(2.5));
        CHECK(j["mb_to_target_per_peer"].get<double>() == doctest::Approx(5));
        CHECK(j["peer_quantiles"]["bytes_sent"]["p50"].get<double>() == 2'000'000);
    }
    SUBCASE("one seed did not") {
        sim::SweepStats stats("dpsgd", 0.8);
        stats.add(run_with({1, 2}, {0.5, 0.9}));
        stats.add(run_with({1, 2}, {0.5, 0.6}));
        const auto s = stats.summary();
        CHECK(s.reached == 1);
        CHECK_FALSE(s.all_reached());
        const auto j = sim::to_json(s);
        CHECK(j["reached"] == 1);
        CHECK(j["time_to_target"].is_null());
        CHECK(j["samples_to_target"].is_null());
        CHECK(j["time_to_target_peer_mean"].is_null());
    }
    SUBCASE("no target") {
        sim::SweepStats stats("dpsgd", std::nan(""));
        stats.add(run_with({1, 2}, {0.5, 0.9}));
        const auto s = stats.summary();
        CHECK_FALSE(s.has_goal);
        CHECK(s.reached == 0);
        CHECK(sim::to_json(s)["time_to_target"].is_null());
    }
}

TEST_CASE("sweep statistics: a loss target is a validation loss at most X, text adds bits") {
    // Losses 2.0, 1.4, 1.1 at t = 1, 2, 3 (a language model's nats per character).
    auto run = [](bool text) {
        auto r = run_with({1, 2, 3}, {0.1, 0.2, 0.3});
        const double loss[] = {2.0, 1.4, 1.1};
        for (std::size_t i = 0; i < 3; ++i) {
            r.evals[i].loss = loss[i];
            r.evals[i].mean_loss = loss[i] + 0.1;  // the peers' own models: 2.1, 1.5, 1.2
        }
        r.text = text;
        return r;
    };
    sim::SweepStats stats("dpsgd", 1.4, true);
    stats.add(run(true));
    const auto s = stats.summary();
    CHECK(s.goal_is_loss);
    CHECK(s.all_reached());
    CHECK(s.time_to_target.mean == doctest::Approx(2));  // at most: 1.4 counts
    CHECK(s.final_loss.mean == doctest::Approx(1.1));
    const auto j = sim::to_json(s);
    CHECK(j["time_to_target"].get<double>() == doctest::Approx(2));
    CHECK(j["time_to_target_peer_mean"].get<double>() == doctest::Approx(3));
    CHECK(j["final_loss"].get<double>() == doctest::Approx(1.1));
    CHECK(j["final_bpc"].get<double>() == doctest::Approx(1.1 / std::log(2.0)));
    // Not reached when the loss never gets that low; an accuracy goal of 0.25 reads accuracies.
    sim::SweepStats low("dpsgd", 1.0, true);
    low.add(run(true));
    CHECK(low.summary().reached == 0);
    sim::SweepStats acc("dpsgd", 0.25);
    acc.add(run(false));
    CHECK(acc.summary().time_to_target.mean == doctest::Approx(3));
    // Data that is not text keeps its JSON as it was: no loss fields added.
    CHECK_FALSE(sim::to_json(acc.summary()).contains("final_bpc"));
    CHECK_FALSE(sim::to_json(acc.summary()).contains("final_loss"));
}

TEST_CASE("a sweep writes each run's folder whole and one summary per algorithm, in order") {
    test::TempDir dir;
    topology::FamilySpec fam;
    fam.family = "ring";
    fam.n = 4;
    const auto cluster = homogeneous_cluster(4, 0.01, 1e-5, 1e9);
    sim::SweepSpec spec;
    spec.base.topology = topology::generate(fam);
    spec.base.cluster = &cluster;
    spec.base.mode = sim::Mode::cost;
    spec.base.steps = 5;
    spec.base.model_size = 1000;
    spec.algorithms = {"dpsgd", "allreduce"};
    spec.seeds = 2;
    spec.out = dir.path() / "out";
    std::vector<std::string> runs;
    const auto rows = sim::run_sweep(spec, [&](const sim::RunReport& run) {
        runs.push_back(run.algorithm + "/" + std::to_string(run.seed_index));
        CHECK(run.result.peers.size() == 4);
        CHECK_FALSE(run.trace_path);
    });
    CHECK(runs == std::vector<std::string>{"dpsgd/0", "dpsgd/1", "allreduce/0", "allreduce/1"});
    REQUIRE(rows.size() == 2);
    CHECK(rows[0].algorithm == "dpsgd");
    CHECK(rows[1].algorithm == "allreduce");
    for (const auto& row : rows) {
        CHECK(row.seeds == 2);
        CHECK(row.end_time.count == 2);
        CHECK(row.final_accuracy.count == 0);  // cost mode: no evaluations
        for (const char* seed : {"seed0", "seed1"}) {
            const auto run = spec.out / row.algorithm / seed;
            CHECK(std::filesystem::is_regular_file(run / "metrics.jsonl"));
            CHECK(std::filesystem::is_regular_file(run / "peers.jsonl"));
            CHECK_FALSE(std::filesystem::exists(run.string() + ".partial"));
        }
    }
}
