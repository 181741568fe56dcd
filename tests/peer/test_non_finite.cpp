// One diverging peer does not poison the job with real drivers (docs/operations/reliability.md,
// "Non-finite values"): four peers as threads over the in-process transport; rank 2's update
// of its step 20 of 60 holds a NaN (its loss is finite), so its model becomes NaN. It stops at
// once with one line (Diverged) and leaves as a crash does; gossip carries on without it and
// every other model stays finite; the all-reduce stops naming it.
#include <doctest/doctest.h>

#include <limits>
#include <string>

#include "gossamer/core/finite.hpp"
#include "gossamer/optimizers/protocol/registry.hpp"
#include "optimizers/harness/network.hpp"
#include "peers.hpp"
#include "support/poisoned_worker.hpp"

using namespace peer_test;

namespace {

constexpr int kN = 4;
constexpr int kBad = 2;
constexpr std::int64_t kSteps = 60;

struct Job {
    gossamer::testing::Network net;
    std::vector<Outcome> out;
};

Job run_poisoned(const std::string& algorithm) {
    const bool push_sum = algorithm == "sgp" || algorithm == "async";
    Job job{gossamer::testing::make_network(
                family("ring", kN,
                       push_sum ? topology::WeightRule::push_sum : topology::WeightRule::uniform),
                kSteps,
                [algorithm](const json::Node* o, proto::PeerContext c) {
                    return proto::make_protocol(algorithm, o, std::move(c));
                },
                nullptr,
                [](int r) {
                    return std::make_unique<test::PoisonedWorker>(
                        r, [](int rank, std::int64_t step, std::span<float> g) {
                            if (rank == kBad && step == 20)
                                g[5] = std::numeric_limits<float>::quiet_NaN();
                        });
                }),
            {}};
    job.out = run_peers(job.net.protocols(), job.net.locals(), [](int) {
        peer::DriverOptions o;
        o.run_timeout = peer::Millis(20'000);
        o.stall_timeout = peer::Millis(10'000);
        o.declared_step_time = [](std::int64_t, double) { return 0.002; };
        return o;
    });
    return job;
}

}  // namespace

TEST_CASE("non-finite peers: gossip goes on without the peer that diverged, nothing is poisoned") {
    for (const std::string algorithm : {"dpsgd", "sgp", "async", "choco"}) {
        CAPTURE(algorithm);
        const auto job = run_poisoned(algorithm);
        const auto& bad = job.out[kBad];
        CHECK(bad.diverged);
        CHECK(bad.error.find("rank 2") != std::string::npos);
        CHECK(bad.error.find('\n') == std::string::npos);
        for (int r = 0; r < kN; ++r) {
            if (r == kBad) continue;
            CAPTURE(r);
            const auto& o = job.out[static_cast<std::size_t>(r)];
            REQUIRE(o.error == "");
            REQUIRE(o.result);
            CHECK(o.result->steps == kSteps);
            std::vector<float> x(job.net.workers[static_cast<std::size_t>(r)]->size());
            job.net.peers[static_cast<std::size_t>(r)]->current_model(x);
            CHECK_FALSE(first_non_finite(x).has_value());
            CHECK(o.result->stats.messages_refused == 0);  // it sent nothing non-finite
        }
    }
}

TEST_CASE("non-finite peers: the all-reduce stops naming the peer that diverged") {
    const auto job = run_poisoned("allreduce");
    CHECK(job.out[kBad].diverged);
    for (int r = 0; r < kN; ++r) {
        if (r == kBad) continue;
        CAPTURE(r);
        const auto& o = job.out[static_cast<std::size_t>(r)];
        REQUIRE(o.failed_rank);
        CHECK(*o.failed_rank == kBad);
        std::vector<float> x(job.net.workers[static_cast<std::size_t>(r)]->size());
        job.net.peers[static_cast<std::size_t>(r)]->current_model(x);
        CHECK_FALSE(first_non_finite(x).has_value());
    }
}
