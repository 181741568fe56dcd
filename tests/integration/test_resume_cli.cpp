// Whole-job resume with gossamer peer processes over UCX on 127.0.0.1
// (docs/operations/checkpoint.md): a job killed (SIGKILL, every peer) after its checkpoints
// restarts with --resume from the newest step all peers hold and ends as the unbroken job did
// (dpsgd, allreduce: the same model.bin bytes; async: total mass 4); a resume that cannot be is one
// line and exit 2.
#include <doctest/doctest.h>

#include "cluster.hpp"
// (cluster.hpp first: it includes <utility> before Boost.Asio)
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "gossamer/core/model_file.hpp"
#include "processes.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

using namespace gossamer::test;
using namespace std::chrono_literals;
using Json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string kBin = GOSSAMER_BINARY;
const std::string kToken = "tok-resume-5d21";

// 4 peers on a ring, synthetic logistic regression with momentum, 20 epochs of 10 steps per
// peer (200 steps of 5 ms), a checkpoint every 50 steps.
struct Job {
    TempDir dir;
    std::string config, cluster;
    Job() {
        config = dir.write("train.json", R"({"seed": 3,
            "data": {"name": "logreg_synthetic", "samples": 800, "test_samples": 200, "features": 10, "seed": 5},
            "model": {"name": "softmax"}, "optimizer": {"name": "sgd", "lr": 0.2, "momentum": 0.9},
            "training": {"epochs": 20, "batch_size": 20}})");
        cluster = dir.write("cluster.json", R"({"defaults": {"base_time": 0.005},
            "network": {"latency": 1e-5, "bandwidth": 1e9}})");
    }
    // A topology file on ports free now (a resumed job may listen elsewhere: only the graph and
    // weights are the job's).
    std::string topology(const std::string& name) const {
        std::string peers;
        for (const auto& e : free_endpoints(4))
            peers += (peers.empty() ? "" : ", ") +
                     fmt::format(R"({{"host": "{}", "port": {}}})", e.host, e.port);
        return dir.write(name, R"({"peers": [)" + peers + R"(], "graph": {"family": "ring"}})");
    }
    std::vector<std::string> args(const std::string& topo, int rank, const std::string& algo,
                                  const std::string& out) const {
        return {kBin,
                "peer",
                "--topology",
                topo,
                "--config",
                config,
                "--cluster",
                cluster,
                "--rank",
                std::to_string(rank),
                "--algorithm",
                algo,
                "--out",
                out,
                "--job-id",
                "9",
                "--eval-samples",
                "0",
                "--checkpoint-every",
                "50"};
    }
    // a with each "--flag value" pair of extra: the value replaced where a has the flag (an
    // option may be given once), else appended.
    static std::vector<std::string> with(std::vector<std::string> a,
                                         const std::vector<std::string>& extra) {
        for (std::size_t i = 0; i + 1 < extra.size(); i += 2) {
            auto it = std::find(a.begin(), a.end(), extra[i]);
            if (it != a.end() && it + 1 != a.end()) {
                *(it + 1) = extra[i + 1];
            } else {
                a.push_back(extra[i]);
                a.push_back(extra[i + 1]);
            }
        }
        return a;
    }
    std::vector<std::unique_ptr<Process>> start(const std::string& topo, const std::string& algo,
                                                const std::string& out,
                                                const std::vector<std::string>& extra = {}) const {
        std::vector<std::unique_ptr<Process>> peers;
        for (int r = 0; r < 4; ++r) {
            const auto a = with(args(topo, r, algo, out), extra);
            peers.push_back(std::make_unique<Process>(
                a,
                (dir.path() / fmt::format("{}-{}.log", fs::path(out).filename().string(), r))
                    .string(),
                std::vector<std::pair<std::string, std::string>>{{"GOSSAMER_JOB_TOKEN", kToken}}));
        }
        return peers;
    }
    // One peer that must refuse before it joins: its exit status and what it wrote.
    std::pair<int, std::string> refused(const std::string& topo, const std::string& algo,
                                        const std::string& out,
                                        const std::vector<std::string>& extra) const {
        const auto a = with(args(topo, 0, algo, out), extra);
        Process p(a, (dir.path() / "refused.log").string(), {{"GOSSAMER_JOB_TOKEN", kToken}});
        const int status = p.wait(20s);
        return {status, p.log()};
    }
};

void finish(std::vector<std::unique_ptr<Process>>& peers) {
    for (std::size_t r = 0; r < peers.size(); ++r) {
        CAPTURE(r);
        const int status = peers[r]->wait(60s);
        const std::string log = peers[r]->log();
        CAPTURE(log);
        CHECK(status == 0);
    }
}

// Waits until every rank wrote checkpoint-<r>-<step>.state (at most 30 s).
bool all_hold(const std::string& out, std::int64_t step) {
    const auto until = std::chrono::steady_clock::now() + 30s;
    for (;;) {
        bool all = true;
        for (int r = 0; r < 4; ++r)
            all = all && fs::exists(fmt::format("{}/checkpoint-{}-{}.state", out, r, step));
        if (all) return true;
        if (std::chrono::steady_clock::now() > until) return false;
        std::this_thread::sleep_for(5ms);
    }
}

Json average(const std::string& out) {
    std::ifstream in(out + "/average.json");
    return Json::parse(in);
}

}  // namespace

TEST_CASE("peer processes killed after a checkpoint resume and end as the unbroken job") {
    Job job;
    for (const std::string algo : {"dpsgd", "allreduce", "async"}) {
        CAPTURE(algo);
        const std::string whole = (job.dir.path() / (algo + "-whole")).string();
        const std::string cut = (job.dir.path() / (algo + "-cut")).string();
        auto unbroken = job.start(job.topology(algo + "-a.json"), algo, whole);
        finish(unbroken);

        auto stopped = job.start(job.topology(algo + "-b.json"), algo, cut);
        REQUIRE(all_hold(cut, 100));
        for (auto& p : stopped) p->kill(SIGKILL);
        for (auto& p : stopped) p->wait(10s);
        CHECK_FALSE(fs::exists(cut + "/average.json"));

        auto resumed = job.start(job.topology(algo + "-c.json"), algo, cut, {"--resume", cut});
        finish(resumed);
        const std::string log = resumed[2]->log();
        CAPTURE(log);
        CHECK(log.find("[rank 2] resuming at step ") != std::string::npos);
        CHECK(log.find("finished 200 steps") != std::string::npos);
        const Json a = average(cut);
        CHECK(a["steps"] == 200);
        CHECK(a["survivors"] == Json::array({0, 1, 2, 3}));
        if (algo == "async") {
            // Quiesced cuts: no share lost or counted twice across the stop.
            CHECK(a["total_mass"].get<double>() == doctest::Approx(4.0).epsilon(1e-6));
            // Within noise of the unbroken job (async's order of arrivals differs run to run).
            const double loss = a["loss"].get<double>(), whole_loss = average(whole)["loss"];
            CAPTURE(loss);
            CAPTURE(whole_loss);
            CHECK(std::abs(loss / whole_loss - 1) < 0.1);
        } else {
            // The same model, bit for bit: the cut saved replicas, momentum and counters.
            const auto want = gossamer::load_model_file(whole + "/model.bin");
            const auto got = gossamer::load_model_file(cut + "/model.bin");
            CHECK(got.params.size() == want.params.size());
            CHECK(std::equal(got.params.span().begin(), got.params.span().end(),
                             want.params.span().begin(),
                             [](float x, float y) { return std::memcmp(&x, &y, 4) == 0; }));
        }
    }
}

TEST_CASE("a resume that cannot be is one line and exit status 2 before the peer joins") {
    Job job;
    const std::string out = (job.dir.path() / "out").string();
    const std::string topo = job.topology("ring.json");
    auto peers = job.start(topo, "dpsgd", out);
    finish(peers);
    const auto one_line = [](const std::pair<int, std::string>& r, const std::string& says) {
        CAPTURE(r.second);
        CHECK(r.first == 2);
        CHECK(lines_of(r.second) == 1);
        CHECK(r.second.find(says) != std::string::npos);
    };
    // Another job id, another algorithm's checkpoints, another model.
    one_line(job.refused(topo, "dpsgd", out, {"--resume", out, "--job-id", "10"}),
             "a checkpoint of another job (job id: checkpoint 9, job 10)");
    auto wider = job.refused(topo, "dpsgd", out,
                             {"--resume", out, "--config", job.dir.write("wide.json", R"({"seed": 3,
        "data": {"name": "logreg_synthetic", "samples": 800, "test_samples": 200, "features": 12, "seed": 5},
        "model": {"name": "softmax"}, "optimizer": {"name": "sgd", "lr": 0.2, "momentum": 0.9},
        "training": {"epochs": 20, "batch_size": 20}})")});
    one_line(wider, "a checkpoint of another job (model: checkpoint softmax");
    // An algorithm that cannot resume; a step not held; --resume-step alone.
    one_line(job.refused(topo, "choco", out, {"--resume", out}),
             "algorithm choco cannot checkpoint and resume");
    one_line(job.refused(topo, "dpsgd", out, {"--resume", out, "--resume-step", "70"}),
             "step 70 is not held by every peer");
    one_line(job.refused(topo, "dpsgd", out, {"--resume-step", "50"}), "--resume-step");
    // No step every peer holds: rank 1's newest checkpoints gone, rank 0's oldest gone.
    const std::string gaps = (job.dir.path() / "gaps").string();
    fs::create_directories(gaps);
    fs::copy_file(out + "/checkpoint-0-150.state", gaps + "/checkpoint-0-150.state");
    fs::copy_file(out + "/checkpoint-1-50.state", gaps + "/checkpoint-1-50.state");
    one_line(job.refused(topo, "dpsgd", out, {"--resume", gaps}),
             "no checkpoint step that every peer holds");
    // A truncated file (a torn copy): refused by its checksum.
    fs::resize_file(out + "/checkpoint-0-150.state",
                    fs::file_size(out + "/checkpoint-0-150.state") / 2);
    one_line(job.refused(topo, "dpsgd", out, {"--resume", out}),
             "checksum mismatch: the checkpoint is truncated or corrupt");
    // Nothing to resume from.
    one_line(job.refused(topo, "dpsgd", out, {"--resume", (job.dir.path() / "none").string()}),
             "is not a folder");
}

TEST_CASE("peers that would cut at other steps are refused at the start (async)") {
    Job job;
    const std::string out = (job.dir.path() / "out").string();
    const std::string topo = job.topology("ring.json");
    std::vector<std::unique_ptr<Process>> peers;
    for (int r = 0; r < 4; ++r) {
        auto a = Job::with(job.args(topo, r, "async", out), {"--join-timeout", "4"});
        if (r == 3) a = Job::with(a, {"--checkpoint-every", "40"});
        peers.push_back(std::make_unique<Process>(
            a, (job.dir.path() / fmt::format("mixed-{}.log", r)).string(),
            std::vector<std::pair<std::string, std::string>>{{"GOSSAMER_JOB_TOKEN", kToken}}));
    }
    const int refused = peers[3]->wait(30s);
    const std::string log = peers[3]->log();
    CAPTURE(log);
    CHECK(refused == 2);
    CHECK(log.find("checkpoint interval") != std::string::npos);
    for (int r = 0; r < 3; ++r) CHECK(peers[static_cast<std::size_t>(r)]->wait(30s) == 1);
    CHECK_FALSE(fs::exists(out + "/average.json"));
}
