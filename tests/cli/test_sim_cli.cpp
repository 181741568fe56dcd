// gossamer sim as a user runs it: determinism, the straggler, failures, bad inputs.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "support/run.hpp"
#include "support/temp_dir.hpp"

using gossamer::test::run;
using gossamer::test::RunResult;
using gossamer::test::TempDir;
using Json = nlohmann::json;

namespace {

const std::string kBin = GOSSAMER_BINARY;
const std::string kSrc = GOSSAMER_SOURCE_DIR;

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// A small synthetic job: 4 peers on a ring, logistic regression, 3 epochs.
struct Job {
    TempDir dir;
    std::string topology, config;
    Job() {
        topology =
            dir.write("ring4.json", R"({"peers": {"count": 4}, "graph": {"family": "ring"}})");
        config = dir.write("train.json", R"({"seed": 3,
            "data": {"name": "logreg_synthetic", "samples": 800, "test_samples": 200, "features": 10, "seed": 5},
            "model": {"name": "softmax"}, "optimizer": {"name": "sgd", "lr": 0.2},
            "training": {"epochs": 3, "batch_size": 20, "target_accuracy": 0.6}})");
    }
    RunResult sim(const std::string& cluster, const std::string& extra) {
        return run(kBin + " sim --topology " + topology + " --cluster " + cluster + " --config " +
                   config + " " + extra);
    }
    std::string cluster(const std::string& text) { return dir.write("cluster.json", text); }
};

}  // namespace

TEST_CASE("two simulations with the same seed write identical metrics") {
    Job job;
    const auto c = kSrc + "/examples/clusters/jitter16.json";
    const auto a = (job.dir.path() / "a").string(), b = (job.dir.path() / "b").string();
    REQUIRE(job.sim(c, "--algorithms allreduce --out " + a).status == 0);
    REQUIRE(job.sim(c, "--algorithms allreduce --out " + b).status == 0);
    const auto ma = slurp(a + "/allreduce/seed0/metrics.jsonl");
    CHECK(ma.size() > 0);
    CHECK(ma == slurp(b + "/allreduce/seed0/metrics.jsonl"));
    CHECK(slurp(a + "/allreduce/seed0/peers.jsonl") == slurp(b + "/allreduce/seed0/peers.jsonl"));
}

TEST_CASE("all-reduce waits for the straggler: the others sit idle") {
    Job job;
    auto r = job.sim(
        job.cluster(R"({"defaults": {"base_time": 0.01}, "peers": [{"rank": 2, "factor": 4}],
                                     "network": {"latency": 1e-6, "bandwidth": 1e9}})"),
        "--algorithms allreduce --json --out " + (job.dir.path() / "o").string());
    REQUIRE(r.status == 0);
    auto j = Json::parse(r.out);
    const auto& row = j["algorithms"][0];
    // 3 epochs of 10 steps of 0.04 s (the straggler) at least.
    CHECK(row["end_time"].get<double>() >= 30 * 0.04);
    CHECK(row["end_time"].get<double>() < 30 * 0.04 * 1.1);
    CHECK(row["idle_share"].get<double>() > 0.5);  // three of four peers idle 3/4 of the time
    CHECK(row["final_accuracy"].get<double>() > 0.6);
}

TEST_CASE("a failed peer stops all-reduce with a message naming it") {
    Job job;
    auto r = job.sim(
        job.cluster(R"({"defaults": {"base_time": 0.01}, "peers": [{"rank": 1, "fail_at": 0.1}],
                                     "network": {"latency": 1e-6, "bandwidth": 1e9}})"),
        "--algorithms allreduce --out " + (job.dir.path() / "o").string());
    CHECK(r.status == 0);
    CHECK(r.err.find("rank 1 failed; all-reduce stops") != std::string::npos);
}

TEST_CASE("a simulated peer whose loss diverges stops the run with one line and exit 3") {
    Job job;
    std::ifstream in(job.config);
    Json c = Json::parse(in);
    c["model"] = {{"name", "mlp"}, {"hidden", {16}}};
    c["optimizer"]["lr"] = 1e4;  // no mlp survives it (gossamer train exits 3 too)
    job.config = job.dir.write("diverge.json", c.dump());
    const auto r = job.sim(job.cluster(R"({"defaults": {"base_time": 0.01},
                                           "network": {"latency": 1e-6, "bandwidth": 1e9}})"),
                           "--algorithms dpsgd --out " + (job.dir.path() / "out").string());
    CAPTURE(r.err);
    CHECK(r.status == 3);
    // The error is the last line (progress lines may come before it).
    const auto at = r.err.find("error: rank ");
    REQUIRE(at != std::string::npos);
    const std::string line = r.err.substr(at);
    CHECK(line.find('\n') == line.size() - 1);
    CHECK((line.find("the training loss became") != std::string::npos ||
           line.find("its own model became non-finite") != std::string::npos));
    CHECK(line.find("writes no result") != std::string::npos);
}

TEST_CASE("bad cluster files and options are one line and exit 2") {
    Job job;
    auto bad = job.sim(
        job.cluster(
            R"({"defaults": {"base_time": -1}, "network": {"latency": 0, "bandwidth": 1e9}})"),
        "--algorithms allreduce");
    CHECK(bad.status == 2);
    CHECK(bad.err.find("defaults.base_time") != std::string::npos);
    CHECK(bad.err.find('\n') == bad.err.size() - 1);
    auto algo =
        job.sim(kSrc + "/examples/clusters/homogeneous16.json", "--algorithms allreduce,gossipx");
    CHECK(algo.status == 2);
    CHECK(algo.err.find("unknown algorithm \"gossipx\"") != std::string::npos);
    auto size = job.sim(kSrc + "/examples/clusters/small4.json",
                        "--algorithms allreduce --out " + (job.dir.path() / "s").string());
    CHECK(size.status == 0);  // small4 has n = 4, like the ring
    TempDir other;
    auto t8 = other.write("ring8.json", R"({"peers": {"count": 8}, "graph": {"family": "ring"}})");
    auto mismatch = run(kBin + " sim --topology " + t8 + " --cluster " + kSrc +
                        "/examples/clusters/small4.json --config " + job.config);
    CHECK(mismatch.status == 2);
    auto opts = job.sim(kSrc + "/examples/clusters/homogeneous16.json",
                        "--algorithms allreduce --mode fast");
    CHECK(opts.status == 2);
}

TEST_CASE("sim, fair network under contention: the same seed writes identical metrics") {
    Job job;
    // Jitter and a slow network: messages overlap on every uplink and downlink, so the fair
    // network recomputes rates all the time; the results must not depend on anything else.
    const auto c = job.cluster(R"({"defaults": {"base_time": 0.01,
                                     "jitter": {"distribution": "lognormal", "sigma": 0.5}},
                                   "peers": [{"rank": 1, "uplink": 5e3}],
                                   "network": {"latency": 1e-4, "bandwidth": 2e4}})");
    const auto a = (job.dir.path() / "a").string(), b = (job.dir.path() / "b").string();
    REQUIRE(job.sim(c, "--algorithms async,dpsgd --out " + a).status == 0);
    REQUIRE(job.sim(c, "--algorithms async,dpsgd --out " + b).status == 0);
    for (const char* algo : {"async", "dpsgd"}) {
        CAPTURE(algo);
        const auto m = slurp(a + "/" + algo + "/seed0/metrics.jsonl");
        CHECK(m.size() > 0);
        CHECK(m == slurp(b + "/" + algo + "/seed0/metrics.jsonl"));
        CHECK(slurp(a + "/" + algo + "/seed0/peers.jsonl") ==
              slurp(b + "/" + algo + "/seed0/peers.jsonl"));
    }
}

TEST_CASE(
    "sim --network: fair by default, fifo on request, the summary says which, bad is exit 2") {
    Job job;
    // A ring of 4 on a slow network: every peer sends to two neighbours at once, so the models
    // differ in when each message arrives but both finish.
    const auto c = job.cluster(R"({"defaults": {"base_time": 0.01},
                                   "network": {"latency": 1e-4, "bandwidth": 2e4}})");
    const auto cost = [&](const std::string& extra) {
        return run(kBin + " sim --mode cost --steps 10 --model-size 1000 --topology " +
                   job.topology + " --cluster " + c + " --algorithms dpsgd --json " + extra +
                   " --out " + (job.dir.path() / "o").string());
    };
    const auto fair = cost("");
    const auto fifo = cost("--network fifo");
    REQUIRE(fair.status == 0);
    REQUIRE(fifo.status == 0);
    const auto jf = Json::parse(fair.out), jo = Json::parse(fifo.out);
    CHECK(jf["network"] == "fair");
    CHECK(jo["network"] == "fifo");
    CHECK(jf["algorithms"][0]["end_time"].get<double>() > 0);
    CHECK(jf["algorithms"][0]["mb_sent_per_peer"] == jo["algorithms"][0]["mb_sent_per_peer"]);
    const auto bad = cost("--network tcp");
    CHECK(bad.status == 2);
    CHECK(bad.err == "error: --network: unknown model \"tcp\"; use fair or fifo\n");
}

TEST_CASE("every loader names a directory given as a JSON file, and refuses duplicate keys") {
    Job job;
    const auto cluster = kSrc + "/examples/clusters/small4.json";
    TempDir folder;
    const auto dir = folder.path().string();
    auto one_line = [](const RunResult& r, const std::string& text) {
        CAPTURE(r.err);
        CHECK(r.status == 2);
        CHECK(r.err.find(text) != std::string::npos);
        CHECK(r.err.find("end of input") == std::string::npos);
        CHECK(r.err.find('\n') == r.err.size() - 1);
    };
    const std::string tail = " --algorithms allreduce --out " + job.dir.path().string() + "/o";
    one_line(run(kBin + " sim --topology " + dir + " --cluster " + cluster + " --config " +
                 job.config + tail),
             dir + ": is a directory");
    one_line(run(kBin + " sim --topology " + job.topology + " --cluster " + dir + " --config " +
                 job.config + tail),
             dir + ": is a directory");
    one_line(run(kBin + " sim --topology " + job.topology + " --cluster " + cluster + " --config " +
                 dir + tail),
             dir + ": is a directory");
    const auto dup_topology = job.dir.write(
        "dup.json", R"({"peers": {"count": 4}, "graph": {"family": "ring", "family": "star"}})");
    one_line(run(kBin + " sim --topology " + dup_topology + " --cluster " + cluster + " --config " +
                 job.config + tail),
             dup_topology + ": graph.family: duplicate key \"family\"");
    const auto dup_cluster =
        job.dir.write("dupc.json", R"({"defaults": {"base_time": 0.01, "base_time": 0.02}})");
    one_line(run(kBin + " sim --topology " + job.topology + " --cluster " + dup_cluster +
                 " --config " + job.config + tail),
             dup_cluster + ": defaults.base_time: duplicate key \"base_time\"");
    const auto dup_config = job.dir.write("dupt.json", R"({"seed": 3, "seed": 4})");
    one_line(run(kBin + " sim --topology " + job.topology + " --cluster " + cluster + " --config " +
                 dup_config + tail),
             dup_config + ": seed: duplicate key \"seed\"");
    CHECK_FALSE(std::filesystem::exists(job.dir.path() / "o"));
}

TEST_CASE("sim reports the mean of the peers' own accuracies and when it reaches the target") {
    Job job;
    const auto out = (job.dir.path() / "m").string();
    auto r = job.sim(job.cluster(R"({"defaults": {"base_time": 0.005},
        "network": {"latency": 1e-5, "bandwidth": 1e9}})"),
                     "--algorithms async --eval-interval 0.05 --peer-eval-samples 150 --json "
                     "--out " +
                         out);
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    std::ifstream in(out + "/async/seed0/metrics.jsonl");
    std::string line;
    std::optional<double> first_mean;  // the first eval time at which the peer mean reached 0.6
    int lines = 0;
    while (std::getline(in, line)) {
        const auto j = Json::parse(line);
        const double mean = j["mean_accuracy"].get<double>();
        CHECK(mean >= j["min_accuracy"].get<double>() - 1e-12);
        CHECK(mean <= j["max_accuracy"].get<double>() + 1e-12);
        if (!first_mean && mean >= 0.6) first_mean = j["time"].get<double>();
        ++lines;
    }
    CHECK(lines >= 3);
    const auto row = Json::parse(r.out)["algorithms"][0];
    REQUIRE(first_mean);
    REQUIRE(row["time_to_target_peer_mean"].is_number());
    CHECK(row["time_to_target_peer_mean"].get<double>() == *first_mean);
    auto bad = job.sim(kSrc + "/examples/clusters/small4.json", "--peer-eval-samples 0");
    CHECK(bad.status == 2);
    CHECK(bad.err ==
          "error: --peer-eval-samples: 0 is out of range; use a value from 1 to "
          "100000000\n");
}

TEST_CASE("sim --target-loss: the time to the first evaluation whose loss is at most X") {
    Job job;
    const auto out = (job.dir.path() / "l").string();
    const auto cluster = job.cluster(R"({"defaults": {"base_time": 0.005},
        "network": {"latency": 1e-5, "bandwidth": 1e9}})");
    auto r = job.sim(cluster, "--algorithms dpsgd --eval-interval 0.05 --json --out " + out);
    REQUIRE(r.status == 0);
    // The exact average's losses at the evaluations; the goal between the first and the last.
    std::ifstream in(out + "/dpsgd/seed0/metrics.jsonl");
    std::vector<std::pair<double, double>> evals;  // (time, loss)
    for (std::string line; std::getline(in, line);) {
        const auto j = Json::parse(line);
        CHECK_FALSE(j.contains("bpc"));  // not text data
        evals.emplace_back(j["time"].get<double>(), j["loss"].get<double>());
    }
    REQUIRE(evals.size() >= 3);
    const double goal = (evals.front().second + evals.back().second) / 2;
    double expected = -1;
    for (const auto& [t, loss] : evals)
        if (loss <= goal) {
            expected = t;
            break;
        }
    auto g = job.sim(cluster, fmt::format("--algorithms dpsgd --eval-interval 0.05 --json "
                                          "--target-loss {:.17g} --out {}2",
                                          goal, out));
    CAPTURE(g.err);
    REQUIRE(g.status == 0);
    const auto row = Json::parse(g.out)["algorithms"][0];
    CHECK(row["time_to_target"].get<double>() == expected);
    auto table = job.sim(cluster, fmt::format("--algorithms dpsgd --eval-interval 0.05 "
                                              "--target-loss {:.17g} --out {}3",
                                              goal, out));
    REQUIRE(table.status == 0);
    CHECK(table.out.find(fmt::format("time to loss {:g}", goal)) != std::string::npos);
    auto both = job.sim(cluster, "--target 0.5 --target-loss 1 --out " + out + "4");
    CHECK(both.status == 2);
    CHECK(both.err.find("--target and --target-loss") != std::string::npos);
}

// A real peer copies its model for a tick at its first step boundary after it (before that
// step's update reaches the protocol); the simulator judges the same model, not the one a
// dpsgd peer holds while it waits for its neighbours (its own step applied, not yet mixed),
// which made the sim's peer mean lag the lab's (docs/formats/metrics.md, "Evaluation points").
TEST_CASE("sim judges each peer's own model at its first step boundary after the tick") {
    Job job;
    const auto out = (job.dir.path() / "b").string();
    const auto trace = (job.dir.path() / "b.json").string();
    auto r = job.sim(job.cluster(R"({"defaults": {"base_time": 0.005},
        "peers": [{"rank": 1, "factor": 3}],
        "network": {"latency": 1e-5, "bandwidth": 1e9}})"),
                     "--algorithms dpsgd --eval-interval 0.04 --peer-eval-samples 100 --trace " +
                         trace + " --out " + out);
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    std::ifstream in(trace);
    const auto doc = Json::parse(in);
    std::map<int, std::set<long long>> step_ends;  // per peer, in microseconds
    std::map<int, long long> last_end;
    std::vector<std::pair<int, long long>> evals;
    for (const auto& e : doc["traceEvents"]) {
        if (!e.contains("cat") || !e.contains("pid")) continue;
        const int pid = e["pid"].get<int>();
        const auto ts = std::llround(e["ts"].get<double>());
        if (e["cat"] == "step") {
            const auto end = std::llround(e["ts"].get<double>() + e["dur"].get<double>());
            step_ends[pid].insert(end);
            last_end[pid] = std::max(last_end[pid], end);
        } else if (e["cat"] == "evaluation" && pid < 1000) {
            evals.emplace_back(pid, ts);
        }
    }
    REQUIRE(evals.size() >= 20);
    std::set<int> judged;
    for (const auto& [peer, ts] : evals) {
        CAPTURE(peer);
        CAPTURE(ts);
        // At a step's end, or (a finished peer) at or after its last one.
        const bool at_boundary = step_ends[peer].count(ts) > 0 || ts >= last_end[peer];
        CHECK(at_boundary);
        judged.insert(peer);
    }
    CHECK(judged.size() == 4);
}

TEST_CASE("sim --average-eval-samples judges the average on that many samples at the ticks only") {
    Job job;
    const auto cluster = job.cluster(R"({"defaults": {"base_time": 0.005},
        "network": {"latency": 1e-5, "bandwidth": 1e9}})");
    auto run_with = [&](const std::string& dir, const std::string& extra) {
        auto r = job.sim(cluster, "--algorithms dpsgd --eval-interval 0.05 --json --out " +
                                      (job.dir.path() / dir).string() + extra);
        CAPTURE(r.err);
        REQUIRE(r.status == 0);
        return r;
    };
    const auto whole = run_with("whole", "");
    const auto some = run_with("some", " --average-eval-samples 37");
    std::ifstream in((job.dir.path() / "some/dpsgd/seed0/metrics.jsonl").string());
    std::vector<double> ticks;
    for (std::string line; std::getline(in, line);)
        ticks.push_back(Json::parse(line)["accuracy"].get<double>());
    REQUIRE(ticks.size() >= 3);
    // At the ticks: k correct of 37. The last line is the final evaluation on the whole set.
    int on_subset = 0;
    for (std::size_t i = 0; i + 1 < ticks.size(); ++i) {
        const double k = ticks[i] * 37;
        if (std::abs(k - std::round(k)) < 1e-6) ++on_subset;
    }
    CHECK(on_subset == static_cast<int>(ticks.size()) - 1);
    // The same training: the final accuracy (whole test set) is the run's without the option.
    const auto a = Json::parse(whole.out)["algorithms"][0]["final_accuracy"].get<double>();
    const auto b = Json::parse(some.out)["algorithms"][0]["final_accuracy"].get<double>();
    CHECK(a == b);
    auto bad = job.sim(cluster, "--average-eval-samples 0");
    CHECK(bad.status == 2);
    CHECK(bad.err ==
          "error: --average-eval-samples: 0 is out of range; use a value from 1 to "
          "100000000\n");
}

TEST_CASE("sim: the messages of one edge go one after another under the fair network too") {
    // A ring all-reduce on uneven8 (two 100 Mbit/s peers): the fast peers run a step ahead and
    // queue a second message on an edge into a slow peer. Shared fairly with the first, as
    // separate flows, it stretched every step to 5.5 s; the lab measured 3.46 s, what one TCP
    // connection per edge gives (3.3 s, as under fifo). docs/modules/simulator.md.
    auto end_time = [](const std::string& network) {
        const auto r =
            run(kBin + " sim --mode cost --steps 10 --algorithms allreduce --json --network " +
                network + " --topology " + kSrc + "/examples/lab/ring8.json --cluster " + kSrc +
                "/examples/lab/uneven8.json --config " + kSrc + "/examples/lab/experiment8.json");
        CAPTURE(r.err);
        REQUIRE(r.status == 0);
        return Json::parse(r.out)["algorithms"][0]["end_time"].get<double>();
    };
    const double fair = end_time("fair"), fifo = end_time("fifo");
    CHECK(fair == doctest::Approx(fifo).epsilon(0.02));
    CHECK(fair < 40.0);  // 10 steps of about 3.3 s
}

TEST_CASE("a bad option of any algorithm stops the simulation before anything runs") {
    Job job;
    job.config = job.dir.write("bad.json", R"({"seed": 3,
        "data": {"name": "logreg_synthetic", "samples": 800, "features": 10},
        "model": {"name": "softmax"}, "optimizer": {"name": "sgd", "lr": 0.2},
        "algorithms": {"sgp": {"staleness": -1}}})");
    const auto out = (job.dir.path() / "o").string();
    auto r = job.sim(kSrc + "/examples/clusters/homogeneous16.json",
                     "--algorithms allreduce,sgp --out " + out);
    CAPTURE(r.err);
    CHECK(r.status == 2);
    CHECK(r.err.find("algorithms.sgp.staleness") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(out));
}

TEST_CASE("async writes its per-edge staleness, shares and weights into peers.jsonl") {
    Job job;
    const auto out = (job.dir.path() / "o").string();
    auto r =
        job.sim(kSrc + "/examples/clusters/straggler16.json", "--algorithms async --out " + out);
    REQUIRE(r.status == 0);
    std::ifstream in(out + "/async/seed0/peers.jsonl");
    int peers = 0;
    for (std::string line; std::getline(in, line); ++peers) {
        auto j = Json::parse(line);
        REQUIRE(j["edges"].is_array());
        CHECK(j["edges"].size() == 2);  // a ring of 4: two neighbours
        for (const auto& e : j["edges"])
            for (const char* key : {"peer", "staleness_max", "staleness_mean", "shares",
                                    "weight_sent", "weight_received", "last_fraction", "rate"})
                CHECK_MESSAGE(e.contains(key), key);
    }
    CHECK(peers == 4);
}

TEST_CASE(
    "bad straggler-policy, compressor and reweight options: one line naming the path, exit 2") {
    const std::pair<const char*, const char*> cases[] = {
        {R"("async": {"beta": 0})", "algorithms.async.beta"},
        {R"("async": {"deadline_percentile": 1.5})", "algorithms.async.deadline_percentile"},
        {R"("async": {"step": "sideways"})", "algorithms.async.step"},
        {R"("async": {"report_every": 0})", "algorithms.async.report_every"},
        {R"("choco": {"compressor": {"name": "topk", "fraction": 0}})",
         "algorithms.choco.compressor.fraction"},
        {R"("choco": {"compressor": {"name": "gzip"}})", "algorithms.choco.compressor.name"},
        {R"("choco": {"replicas": "some"})", "algorithms.choco.replicas"},
        {R"("dpsgd": {"reweight": {"decay": 0}})", "algorithms.dpsgd.reweight.decay"},
    };
    for (const auto& [options, path] : cases) {
        CAPTURE(options);
        Job job;
        job.config = job.dir.write("bad.json", std::string(R"({"seed": 3,
            "data": {"name": "logreg_synthetic", "samples": 800, "features": 10},
            "model": {"name": "softmax"}, "optimizer": {"name": "sgd", "lr": 0.2},
            "algorithms": {)") + options + "}}");
        const auto out = (job.dir.path() / "o").string();
        auto r = job.sim(kSrc + "/examples/clusters/homogeneous16.json",
                         "--algorithms allreduce,dpsgd,async,choco --out " + out);
        CAPTURE(r.err);
        CHECK(r.status == 2);
        CHECK(r.err.find(path) != std::string::npos);
        CHECK(r.err.find("bad.json") != std::string::npos);
        CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
        CHECK_FALSE(std::filesystem::exists(out));
    }
}

namespace {

// The small job with an MLP 10-8-2 split into fast = fc2 and slow = fc1 (period 4).
std::string multirate_config(Job& job, const std::string& multirate) {
    return job.dir.write("mr.json", R"({"seed": 3,
        "data": {"name": "logreg_synthetic", "samples": 800, "test_samples": 200, "features": 10, "seed": 5},
        "model": {"name": "mlp", "hidden": [8]}, "optimizer": {"name": "sgd", "lr": 0.2},
        "training": {"epochs": 3, "batch_size": 20},
        "partitions": {"fast": ["fc2"], "slow": ["*"]},
        "multirate": )" + multirate + "}");
}

}  // namespace

TEST_CASE("multirate: per-partition updates, backward work and bytes reach peers.jsonl") {
    Job job;
    job.config = multirate_config(job, R"({"partitions": {"slow": {"period": 4}}})");
    const auto out = (job.dir.path() / "o").string();
    auto r =
        job.sim(kSrc + "/examples/clusters/small4.json", "--algorithms dpsgd --json --out " + out);
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    const auto summary = Json::parse(r.out);
    CHECK(summary["algorithms"][0]["backward_gmac_per_peer"].get<double>() > 0);
    std::ifstream in(out + "/dpsgd/seed0/peers.jsonl");
    int peers = 0;
    for (std::string line; std::getline(in, line); ++peers) {
        auto j = Json::parse(line);
        const auto steps = j["steps"].get<std::int64_t>();  // 200 samples / 20 * 3 epochs
        CHECK(steps == 30);
        REQUIRE(j["partitions"].size() == 2);
        const auto& slow = j["partitions"][0];
        const auto& fast = j["partitions"][1];
        CHECK(slow["name"] == "slow");
        CHECK(slow["updates"] == steps / 4);
        CHECK(fast["updates"] == steps);
        CHECK(slow["bytes_sent"].get<std::uint64_t>() + fast["bytes_sent"].get<std::uint64_t>() ==
              j["bytes_sent"].get<std::uint64_t>());
        CHECK(slow["backward_macs"].get<std::uint64_t>() +
                  fast["backward_macs"].get<std::uint64_t>() ==
              j["backward_macs"].get<std::uint64_t>());
    }
    CHECK(peers == 4);
}

TEST_CASE("multirate: per-partition gossip with sgp is one line, exit 2, nothing written") {
    Job job;
    job.config = multirate_config(job, R"({"partitions": {"slow": {"period": 4}}})");
    const auto out = (job.dir.path() / "o").string();
    auto r =
        job.sim(kSrc + "/examples/clusters/small4.json", "--algorithms dpsgd,sgp --out " + out);
    CAPTURE(r.err);
    CHECK(r.status == 2);
    CHECK(r.err.find("multirate.partitions.slow: sgp gossips the whole model") !=
          std::string::npos);
    CHECK(r.err.find('\n') == r.err.size() - 1);
    CHECK_FALSE(std::filesystem::exists(out));
}

TEST_CASE("sim: an output folder that cannot be created is one line, exit 2, before it runs") {
    Job job;
    const auto file = job.dir.write("a_file", "mine");
    for (const std::string& out : {file, file + "/sub", std::string("/proc/gossamer-test/out")}) {
        CAPTURE(out);
        auto r =
            job.sim(kSrc + "/examples/clusters/small4.json", "--algorithms allreduce --out " + out);
        CAPTURE(r.err);
        CHECK(r.status == 2);
        CHECK(r.err.rfind("error: --out: ", 0) == 0);
        CHECK(r.err.find(out) != std::string::npos);
        CHECK(r.err.find('\n') == r.err.size() - 1);
    }
    CHECK(slurp(file) == "mine");
}

TEST_CASE("sim: a folder the user wrote is refused, an earlier simulation's is replaced") {
    Job job;
    const auto c = kSrc + "/examples/clusters/small4.json";
    const auto out = job.dir.path() / "out";
    std::filesystem::create_directories(out);
    job.dir.write("out/notes.txt", "keep me");
    auto mine = job.sim(c, "--algorithms allreduce --out " + out.string());
    CHECK(mine.status == 2);
    CHECK(mine.err.find("is not empty and holds no .gossamer-output marker") != std::string::npos);
    CHECK(mine.err.find('\n') == mine.err.size() - 1);
    CHECK(slurp((out / "notes.txt").string()) == "keep me");
    CHECK_FALSE(std::filesystem::exists(out / "allreduce"));
    // The README's two simulations into one folder: the second says it replaces the first.
    const auto sims = job.dir.path() / "sims";
    REQUIRE(job.sim(c, "--algorithms allreduce,dpsgd --out " + sims.string()).status == 0);
    auto second = job.sim(c, "--algorithms sgp --out " + sims.string());
    CAPTURE(second.err);
    REQUIRE(second.status == 0);
    CHECK(second.err.find("note: replacing the earlier Gossamer output in " + sims.string() +
                          " (written by gossamer sim at ") != std::string::npos);
    CHECK(std::filesystem::exists(sims / "sgp/seed0/metrics.jsonl"));
    CHECK_FALSE(std::filesystem::exists(sims / "allreduce"));  // no stale mix of two runs
}

TEST_CASE("sim: sizes that cannot work are refused up front, naming the size and the limit") {
    Job job;
    const auto c = kSrc + "/examples/clusters/homogeneous16.json";
    const auto out = (job.dir.path() / "o").string();
    // Cost mode keeps no values, but one full model of 37 GiB takes 32 s over 10 Gbit/s: with
    // dpsgd's 5 s resync timeout the waiting peers asked for copies faster than they came,
    // until the event queue had taken 2.5 GB and more (std::bad_alloc).
    auto cost = run(kBin + " sim --mode cost --topology " + job.topology + " --cluster " + c +
                    " --algorithms sgp,dpsgd --steps 20 --model-size 10000000000 --out " + out);
    CAPTURE(cost.err);
    CHECK(cost.status == 2);
    CHECK(cost.err.rfind("error: --model-size: one full model of 37.25 GiB takes 32 s over the "
                         "slowest link of " +
                             c,
                         0) == 0);
    CHECK(cost.err.find("dpsgd's resync_timeout of 5 s") != std::string::npos);
    CHECK(cost.err.find('\n') == cost.err.size() - 1);
    CHECK_FALSE(std::filesystem::exists(out));
    // A resync timeout above the transfer lets it run.
    const auto cfg =
        job.dir.write("resync.json", R"({"data": {"name": "logreg_synthetic", "samples": 100,
        "features": 4}, "model": {"name": "softmax"}, "optimizer": {"name": "sgd", "lr": 0.1},
        "algorithms": {"dpsgd": {"resync_timeout": 64}}})");
    auto slow = run(kBin + " sim --mode cost --topology " + job.topology + " --cluster " + c +
                    " --config " + cfg +
                    " --algorithms dpsgd --steps 3 --model-size 10000000000 --json --out " + out);
    CAPTURE(slow.err);
    CHECK(slow.status == 0);
    // Math mode: every peer keeps its model, gradient and the protocol's copies.
    auto huge = job.dir.write("huge.json", R"({"data": {"name": "logreg_synthetic", "samples": 800,
        "features": 10}, "model": {"name": "mlp", "hidden": [1000000, 1000000]},
        "optimizer": {"name": "sgd", "lr": 0.1}})");
    auto math = run(kBin + " sim --topology " + job.topology + " --cluster " + c + " --config " +
                    huge + " --algorithms dpsgd --out " + out + "-math");
    CAPTURE(math.err);
    CHECK(math.status == 2);
    CHECK(math.err.rfind("error: " + huge +
                             ": model: simulating 4 peers of 1000014000002 "
                             "parameters with dpsgd needs about",
                         0) == 0);
    CHECK(math.err.find("TiB of memory, more than the") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(out + "-math"));
}

TEST_CASE("sim refuses cluster times out of range instead of printing a 300-digit time") {
    Job job;
    for (const std::string base : {"1e300", "1e10", "86401"}) {
        CAPTURE(base);
        auto r = job.sim(job.cluster(R"({"defaults": {"base_time": )" + base +
                                     R"(}, "network": {"latency": 0, "bandwidth": 1e9}})"),
                         "--algorithms allreduce --out " + (job.dir.path() / "o").string());
        CAPTURE(r.err);
        CHECK(r.status == 2);
        CHECK(r.err.find("defaults.base_time: base_time") != std::string::npos);
        CHECK(r.err.find("it must lie in (0, 86400] seconds") != std::string::npos);
        CHECK(r.err.find('\n') == r.err.size() - 1);
        CHECK(r.out.empty());
    }
}

TEST_CASE("sim: --peer-metrics samples or drops the peers.jsonl records, the quantiles cover all") {
    TempDir dir;
    const auto topo = dir.write("exp64.json", R"({"peers": {"count": 64},
        "graph": {"family": "one_peer_exponential"}, "weights": "push_sum"})");
    auto sim = [&](const std::string& extra, const std::string& out) {
        return run(kBin + " sim --mode cost --steps 20 --topology " + topo + " --cluster " +
                   dir.write("c.json", R"({"defaults": {"base_time": 0.01},
                       "network": {"latency": 1e-4, "bandwidth": 1e9},
                       "peers": [{"rank": 5, "factor": 4}]})") +
                   " --algorithms async --json --out " + (dir.path() / out).string() + " " + extra);
    };
    auto records = [&](const std::string& out) {
        std::ifstream in(dir.path() / out / "async" / "seed0" / "peers.jsonl");
        std::vector<int> ranks;
        for (std::string line; std::getline(in, line);)
            ranks.push_back(Json::parse(line)["rank"].get<int>());
        return ranks;
    };
    const auto all = sim("", "all");
    REQUIRE(all.status == 0);
    CHECK(records("all").size() == 64);  // up to 4096 peers: every record by default
    const auto sampled = sim("--peer-metrics 'sample 8'", "sampled");
    REQUIRE(sampled.status == 0);
    CHECK(records("sampled") == std::vector<int>{0, 8, 16, 24, 32, 40, 48, 56});
    const auto none = sim("--peer-metrics none", "none");
    REQUIRE(none.status == 0);
    CHECK(records("none").empty());
    // The quantiles are over every peer whatever is recorded, so all three runs agree.
    const auto q = Json::parse(all.out)["algorithms"][0]["peer_quantiles"];
    CHECK(q == Json::parse(none.out)["algorithms"][0]["peer_quantiles"]);
    CHECK(q == Json::parse(sampled.out)["algorithms"][0]["peer_quantiles"]);
    for (const char* key : {"idle_share", "bytes_sent", "staleness_max"}) {
        CAPTURE(key);
        REQUIRE(q[key].is_object());
        CHECK(q[key]["p50"].get<double>() <= q[key]["p90"].get<double>());
        CHECK(q[key]["p90"].get<double>() <= q[key]["p99"].get<double>());
    }
    CHECK(q["bytes_sent"]["p50"].get<double>() > 0);
    CHECK(q["idle_share"]["p99"].get<double>() >= 0);
    for (const std::string bad : {"some", "sample", "'sample 0'", "'sample x'", "'sample -3'"}) {
        CAPTURE(bad);
        const auto r = sim("--peer-metrics " + bad, "bad");
        CHECK(r.status == 2);
        CHECK(r.err.find("--peer-metrics: use all, none or \"sample K\"") != std::string::npos);
        CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
        CHECK_FALSE(std::filesystem::exists(dir.path() / "bad"));
    }
}

TEST_CASE("sim: in math mode \"sample K\" evaluates K peers on their own, the average as before") {
    TempDir dir;
    const auto topo =
        dir.write("ring16.json", R"({"peers": {"count": 16}, "graph": {"family": "ring"}})");
    const auto config = dir.write("train.json", R"({"seed": 3,
        "data": {"name": "logreg_synthetic", "samples": 1600, "test_samples": 200, "features": 10, "seed": 5},
        "model": {"name": "softmax"}, "optimizer": {"name": "sgd", "lr": 0.2},
        "training": {"epochs": 2, "batch_size": 20, "target_accuracy": 0.6}})");
    const auto cluster = dir.write("c.json", R"({"defaults": {"base_time": 0.01},
        "network": {"latency": 1e-4, "bandwidth": 1e9}})");
    auto sim = [&](const std::string& extra, const std::string& out) {
        return run(kBin + " sim --topology " + topo + " --cluster " + cluster + " --config " +
                   config + " --algorithms dpsgd --json --out " + (dir.path() / out).string() +
                   " " + extra);
    };
    const auto all = sim("", "all");
    const auto some = sim("--peer-metrics 'sample 4'", "some");
    REQUIRE(all.status == 0);
    REQUIRE(some.status == 0);
    const auto a = Json::parse(all.out)["algorithms"][0];
    const auto s = Json::parse(some.out)["algorithms"][0];
    // The exact average and the consensus distance cover every peer either way.
    CHECK(a["final_accuracy"] == s["final_accuracy"]);
    CHECK(a["consensus"] == s["consensus"]);
    // The sampled peers' own accuracies lie within those of all peers.
    CHECK(s["min_accuracy"].get<double>() >= a["min_accuracy"].get<double>());
    CHECK(s["max_accuracy"].get<double>() <= a["max_accuracy"].get<double>());
    CHECK(s["min_accuracy"].get<double>() <= s["max_accuracy"].get<double>());
}

TEST_CASE(
    "churn (docs/operations/elastic.md): same seed, same bytes, and a bad schedule or algorithm is "
    "one line") {
    Job job;
    // 4 peers on a ring of 10 ms steps (30 steps, 0.3 s): 1 leaves, 2 crashes and rejoins, 3
    // joins late.
    const auto c = job.cluster(R"({"defaults": {"base_time": 0.01},
        "peers": [{"rank": 1, "leave_at": 0.2}, {"rank": 2, "fail_at": 0.05, "rejoin_at": 0.15},
                  {"rank": 3, "join_at": 0.1}],
        "network": {"latency": 1e-6, "bandwidth": 1e9}})");
    const auto a = (job.dir.path() / "a").string(), b = (job.dir.path() / "b").string();
    const auto ra = job.sim(c, "--algorithms async,dpsgd --out " + a);
    REQUIRE(ra.status == 0);
    REQUIRE(job.sim(c, "--algorithms async,dpsgd --out " + b).status == 0);
    for (const char* algo : {"async", "dpsgd"}) {
        CAPTURE(algo);
        const std::string dir = std::string("/") + algo + "/seed0/";
        CHECK(slurp(a + dir + "metrics.jsonl").size() > 0);
        CHECK(slurp(a + dir + "metrics.jsonl") == slurp(b + dir + "metrics.jsonl"));
        CHECK(slurp(a + dir + "peers.jsonl") == slurp(b + dir + "peers.jsonl"));
    }
    // An algorithm that cannot follow churn: refused before anything runs or is written.
    const auto o = (job.dir.path() / "o").string();
    const auto sgp = job.sim(c, "--algorithms async,sgp --out " + o);
    CHECK(sgp.status == 2);
    CHECK(sgp.err.find("peers: algorithm sgp cannot join, leave or rejoin a running job yet") !=
          std::string::npos);
    CHECK(sgp.err.find('\n') == sgp.err.size() - 1);
    CHECK_FALSE(std::filesystem::exists(o + "/async"));
    // A bad schedule: one line naming the rank and the field.
    const auto bad = job.sim(job.cluster(R"({"defaults": {"base_time": 0.01},
        "peers": [{"rank": 2, "rejoin_at": 0.15}], "network": {"latency": 0, "bandwidth": 1e9}})"),
                             "--algorithms async");
    CHECK(bad.status == 2);
    CHECK(bad.err.find("peers[0].rejoin_at: rank 2 has rejoin_at 0.15 but no fail_at") !=
          std::string::npos);
    CHECK(bad.err.find('\n') == bad.err.size() - 1);
}

TEST_CASE("bad input: an algorithm listed twice is refused before anything runs") {
    Job job;
    const auto out = (job.dir.path() / "o").string();
    auto r = job.sim(kSrc + "/examples/clusters/jitter16.json",
                     "--algorithms dpsgd,sgp,dpsgd --out " + out);
    CAPTURE(r.err);
    CHECK(r.status == 2);
    CHECK(r.err ==
          "error: --algorithms: \"dpsgd\" is listed twice, and each algorithm writes OUT/dpsgd/; "
          "list each algorithm once\n");
    CHECK_FALSE(std::filesystem::exists(out));
}

TEST_CASE("bad input: a run with more evaluations or events than it can make is refused at once") {
    Job job;
    const auto out = (job.dir.path() / "o").string();
    // A 1e-12 s step (inside base_time's range) and 10 us links: the default evaluation interval
    // is a quarter of a 1e-11 s epoch, and every dpsgd step waits 1e-5 s: it ran for ever.
    const auto c = job.cluster(
        R"({"defaults": {"base_time": 1e-12}, "network": {"latency": 1e-5, "bandwidth": 1e9}})");
    const auto start = std::chrono::steady_clock::now();
    auto r = job.sim(c, "--algorithms dpsgd --out " + out);
    CAPTURE(r.err);
    CHECK(r.status == 2);
    CHECK(r.err.rfind("error: " + c +
                          ": defaults.base_time: dpsgd: evaluating every 2.5e-12 s of virtual time "
                          "(the default: a quarter of a nominal epoch of the fastest peer) over a "
                          "run of at least 0.0003 s (each of its 30 steps waits at least 1e-05 s "
                          "for dpsgd's messages over the links' least latency) is at least 1.2e+08 "
                          "evaluations, more than the 100000 one run may make; give "
                          "--eval-interval 3e-08 or more (about 10000 evaluations), or a base_time "
                          "near what a step really takes\n",
                      0) == 0);
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
    CHECK_FALSE(std::filesystem::exists(out));
    // An interval given on the command line is named as such; the suggested one runs.
    auto given = job.sim(c, "--algorithms dpsgd --eval-interval 1e-9 --out " + out);
    CAPTURE(given.err);
    CHECK(given.status == 2);
    CHECK(given.err.rfind("error: --eval-interval: dpsgd: evaluating every 1e-09 s of virtual "
                          "time over a run of at least 0.0003 s",
                          0) == 0);
    auto ok = job.sim(c, "--algorithms dpsgd --eval-interval 3e-08 --json --out " + out);
    CAPTURE(ok.err);
    CHECK(ok.status == 0);
    // Cost mode: peers x steps past the events one simulation can hold.
    const auto big =
        job.dir.write("big.json", R"({"peers": {"count": 100}, "graph": {"family": "ring"}})");
    const auto c100 = job.dir.write("c100.json", R"({"defaults": {"base_time": 0.01},
        "network": {"latency": 0, "bandwidth": 1e9}})");
    auto cost = run(kBin + " sim --mode cost --topology " + big + " --cluster " + c100 +
                    " --algorithms async --steps 1000000000 --out " + out + "-cost");
    CAPTURE(cost.err);
    CHECK(cost.status == 2);
    CHECK(cost.err ==
          "error: --steps: 100 peers x 1e+09 steps each are at least 1e+11 events, "
          "more than the 6.872e+10 one simulation can hold; lower --steps to "
          "687194767 or less\n");
}
