// gossamer peer started with settings that differ from the job's (issue 16): the odd peer is
// refused at the handshake with one line naming the field and both values (exit 2, nothing
// written); the others stop within their start-up timeout with a line naming the field, instead
// of joining and then hanging, or of the odd peer "succeeding" alone.
#include <doctest/doctest.h>

#include "cluster.hpp"
// (cluster.hpp first: it includes <utility> before Boost.Asio)
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gossamer/peer.hpp"
#include "processes.hpp"
#include "support/temp_dir.hpp"

using namespace gossamer::test;
using namespace std::chrono_literals;

namespace {

const std::string kBin = GOSSAMER_BINARY;
constexpr int kN = 4;
constexpr const char* kJoinTimeout = "4";  // seconds: how long the others wait for the odd one

// 4 peers on free ports, synthetic logistic regression (10 steps per epoch and peer).
struct Job {
    TempDir dir;
    std::vector<bs::Endpoint> eps = free_endpoints(kN);
    std::string out = (dir.path() / "out").string();

    std::string topology(const std::string& family) const {
        std::string peers;
        for (const auto& e : eps)
            peers += (peers.empty() ? "" : ", ") +
                     fmt::format(R"({{"host": "{}", "port": {}}})", e.host, e.port);
        return dir.write(family + "4.json", R"({"peers": [)" + peers +
                                                R"(], "graph": {"family": ")" + family + R"("}})");
    }
    // The training config; `extra` adds top-level members (",\"algorithms\": {...}").
    std::string config(const std::string& name, const std::string& extra = "") const {
        return dir.write(name + ".json", R"({"seed": 3,
            "data": {"name": "logreg_synthetic", "samples": 800, "test_samples": 200, "features": 10, "seed": 5},
            "model": {"name": "softmax"}, "optimizer": {"name": "sgd", "lr": 0.2},
            "partitions": {"a": {"offset": 0, "size": 11}, "b": {"offset": 11, "size": 11}},
            "training": {"epochs": 3, "batch_size": 20})" +
                                             extra + "}");
    }
    std::string cluster(const std::string& name, double base_time) const {
        return dir.write(name + ".json", fmt::format(R"({{"defaults": {{"base_time": {}}},
            "network": {{"latency": 1e-5, "bandwidth": 1e9}}}})",
                                                     base_time));
    }
    // What rank r runs with.
    struct Args {
        Args(std::string t, std::string c, std::string algo = "dpsgd",
             std::vector<std::string> more = {})
            : topology(std::move(t)),
              config(std::move(c)),
              algorithm(std::move(algo)),
              extra(std::move(more)) {}
        std::string topology, config, algorithm;
        std::vector<std::string> extra;
    };
    std::unique_ptr<Process> start(int rank, const Args& a) const {
        std::vector<std::string> argv = {
            kBin,          "peer",      "--topology",     a.topology,
            "--config",    a.config,    "--rank",         std::to_string(rank),
            "--algorithm", a.algorithm, "--out",          out,
            "--job-id",    "9",         "--join-timeout", kJoinTimeout};
        argv.insert(argv.end(), a.extra.begin(), a.extra.end());
        return std::make_unique<Process>(
            argv, (dir.path() / fmt::format("log-{}.txt", rank)).string(),
            std::vector<std::pair<std::string, std::string>>{{"GOSSAMER_JOB_TOKEN", "right"}});
    }
};

bool has_text(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

// Starts the 4 peers with args(rank); `odd` runs with settings that differ in `field`. The odd
// peer (or, when rank 0 is the odd one, every other peer) is refused: exit 2, one line naming
// the field and `values`. Every other peer exits 1 within the start-up timeout with a line
// naming the field. Nothing is written.
void expect_refused(const Job& job, const std::function<Job::Args(int)>& args, int odd,
                    const std::string& field, const std::string& values) {
    std::vector<std::unique_ptr<Process>> peers;
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < kN; ++r) peers.push_back(job.start(r, args(r)));
    const auto deadline = t0 + 40s;  // for all: a hang fails the test well within ctest's limit
    for (int r = 0; r < kN; ++r) {
        CAPTURE(r);
        const auto left = std::max(std::chrono::milliseconds(0),
                                   std::chrono::duration_cast<std::chrono::milliseconds>(
                                       deadline - std::chrono::steady_clock::now()));
        const int status = peers[static_cast<std::size_t>(r)]->wait(left);
        const std::string log = peers[static_cast<std::size_t>(r)]->log();
        CAPTURE(log);
        const bool refused = odd == 0 ? r != 0 : r == odd;
        if (refused) {
            CHECK(status == 2);
            CHECK(lines_of(log) == 1);
            CHECK(has_text(log, fmt::format("rank {} (", r)));
            CHECK(has_text(log, "was refused by rank 0 ("));
        } else {
            CHECK(status == 1);
        }
        CHECK(has_text(log, field + (field.ends_with('s') ? " differ: " : " differs: ")));
        CHECK(has_text(log, values));
        CHECK_FALSE(has_text(log, "right"));  // the token is never shown
        CHECK(!std::filesystem::exists(job.out + fmt::format("/peer{}.jsonl", r)));
    }
    // Rank 0 logged each refusal as it happened, naming the field.
    CHECK(has_text(peers[0]->log(), "refused rank "));
    CHECK(std::chrono::steady_clock::now() - t0 < 30s);
    CHECK(!std::filesystem::exists(job.out + "/average.json"));
    CHECK(!std::filesystem::exists(job.out + "/model.bin"));
}

}  // namespace

TEST_SUITE("integration") {
    TEST_CASE("mismatch: rank 2 with a complete graph, the others a ring (dpsgd) is refused") {
        Job job;
        const auto ring = job.topology("ring"), complete = job.topology("complete");
        const auto config = job.config("train");
        expect_refused(
            job,
            [&](int r) {
                return Job::Args{r == 2 ? complete : ring, config};
            },
            2, "topology graph",
            "rank 2 has complete (n = 4) in complete4.json, rank 0 has ring (n = 4) in "
            "ring4.json; start every peer with the same topology file");
    }

    TEST_CASE("mismatch: rank 0 with --epochs 80 under dpsgd refuses the others") {
        Job job;
        const auto ring = job.topology("ring");
        const auto config = job.config("train");
        expect_refused(
            job,
            [&](int r) {
                Job::Args a{ring, config};
                if (r == 0) a.extra = {"--epochs", "80"};
                return a;
            },
            0, "epochs", "has 3 epochs, rank 0 has 80 epochs");
    }

    TEST_CASE("mismatch: another algorithm (async among dpsgd, sgp among allreduce) is refused") {
        for (const auto& [job_algo, odd_algo] :
             {std::pair<std::string, std::string>{"dpsgd", "async"}, {"allreduce", "sgp"}}) {
            CAPTURE(odd_algo);
            Job job;
            const auto ring = job.topology("ring");
            const auto config = job.config("train");
            expect_refused(
                job,
                [&](int r) {
                    Job::Args a{ring, config, r == 2 ? odd_algo : job_algo};
                    return a;
                },
                2, "algorithm", fmt::format("rank 2 has {}, rank 0 has {}", odd_algo, job_algo));
        }
    }

    TEST_CASE("mismatch: other algorithm options (dpsgd mode cta) are refused") {
        Job job;
        const auto ring = job.topology("ring");
        const auto atc = job.config("train");
        const auto cta = job.config("train-cta", R"(, "algorithms": {"dpsgd": {"mode": "cta"}})");
        expect_refused(
            job,
            [&](int r) {
                return Job::Args{ring, r == 2 ? cta : atc};
            },
            2, "algorithm options",
            R"(rank 2 has dpsgd with {"mode":"cta"}, rank 0 has dpsgd with the defaults)");
    }

    TEST_CASE("mismatch: other partition periods (multirate) are refused") {
        for (const std::string rate : {"gossip_period", "period"}) {
            CAPTURE(rate);
            Job job;
            const auto ring = job.topology("ring");
            const auto plain = job.config("train");
            const auto slow = job.config(
                "train-slow", R"(, "multirate": {"partitions": {"a": {")" + rate + R"(": 2}}})");
            const std::string shown = rate == "period" ? "a (period 2, gossip period 2)"
                                                       : "a (period 1, gossip period 2)";
            expect_refused(
                job,
                [&](int r) {
                    return Job::Args{ring, r == 2 ? slow : plain};
                },
                2, "partitions", "rank 2 has " + shown + ", rank 0 has every partition every step");
        }
    }

    TEST_CASE("mismatch: another cluster file, or none, is refused") {
        Job job;
        const auto ring = job.topology("ring");
        const auto config = job.config("train");
        const auto fast = job.cluster("fast", 0.005), slow = job.cluster("slow", 0.05);
        expect_refused(
            job,
            [&](int r) {
                return Job::Args{ring, config, "dpsgd", {"--cluster", r == 2 ? slow : fast}};
            },
            2, "cluster file", "rank 2 has slow.json, rank 0 has fast.json");
        Job none;
        const auto ring2 = none.topology("ring");
        const auto config2 = none.config("train");
        const auto fast2 = none.cluster("fast", 0.005);
        expect_refused(
            none,
            [&](int r) {
                Job::Args a{ring2, config2};
                if (r != 2) a.extra = {"--cluster", fast2};
                return a;
            },
            2, "cluster file", "rank 2 has no cluster file, rank 0 has fast.json");
    }

    TEST_CASE(
        "mismatch: gossamer::Peer over UCX with another algorithm is refused at the handshake") {
        Job job;
        const auto ring = job.topology("ring");
        std::vector<std::string> errors(kN);
        const auto t0 = std::chrono::steady_clock::now();
        {
            std::vector<std::jthread> threads;
            for (int r = 0; r < kN; ++r)
                threads.emplace_back([&, r] {
                    gossamer::PeerOptions o;
                    o.topology = ring;
                    o.rank = r;
                    o.algorithm = r == 2 ? "async" : "dpsgd";
                    o.steps = 5;
                    o.join_timeout = std::chrono::milliseconds(3000);
                    o.stall_timeout = std::chrono::milliseconds(3000);
                    std::vector<float> x(10, 0.0f);
                    try {
                        gossamer::Peer peer(o, x);
                        peer.finish();
                    } catch (const std::exception& e) {
                        errors[static_cast<std::size_t>(r)] = e.what();
                    }
                });
        }
        CHECK(std::chrono::steady_clock::now() - t0 < 30s);
        for (int r = 0; r < kN; ++r) {
            CAPTURE(r);
            const auto& e = errors[static_cast<std::size_t>(r)];
            CHECK_MESSAGE(has_text(e,
                                   "algorithm differs: rank 2 has async, rank 0 has dpsgd; give "
                                   "every peer the same PeerOptions::algorithm"),
                          e);
            if (r == 2) CHECK(has_text(e, "was refused by rank 0 ("));
        }
    }
}
