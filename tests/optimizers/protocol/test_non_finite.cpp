// One diverging peer must not poison the job (docs/operations/reliability.md, "Non-finite values"):
// a message holding a NaN or an infinity is refused before it is mixed in, its sender is named and
// treated as failed, and a peer whose own model or loss is not finite stops (Diverged) before it
// sends anything. For every gossip algorithm and the all-reduce baseline.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "gossamer/core/error.hpp"
#include "gossamer/core/finite.hpp"
#include "gossamer/optimizers/compress/compressor.hpp"
#include "gossamer/optimizers/protocol/registry.hpp"
#include "gossamer/topology/schedule.hpp"
#include "optimizers/harness/harness.hpp"
#include "optimizers/harness/workers.hpp"
#include "support/poisoned_worker.hpp"

using namespace gossamer;
using test::Poison;
using test::PoisonedWorker;
using testing::Harness;
using testing::StandInWorker;

namespace {

constexpr int kN = 4;
constexpr int kBad = 2;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

const char* const kAlgorithms[] = {"dpsgd", "sgp", "async", "choco", "allreduce"};

bool push_sum(const std::string& a) {
    return a == "sgp" || a == "async";
}

std::shared_ptr<const topology::Schedule> ring(const std::string& algorithm) {
    topology::FamilySpec f;
    f.family = "ring";
    f.n = kN;
    f.weights =
        push_sum(algorithm) ? topology::WeightRule::push_sum : topology::WeightRule::uniform;
    return topology::generate(f);
}

std::unique_ptr<Harness> make_job(const std::string& algorithm, Poison poison = {},
                                  double value_bound = 0) {
    std::vector<std::unique_ptr<proto::LocalWorker>> workers;
    for (int r = 0; r < kN; ++r) workers.push_back(std::make_unique<PoisonedWorker>(r, poison));
    testing::HarnessOptions o;
    o.max_steps = 30;
    o.topology = ring(algorithm);
    o.check_edge_seq = false;  // dpsgd and choco number each channel's messages on their own
    return std::make_unique<Harness>(
        std::move(workers),
        [algorithm, value_bound](proto::PeerContext c) {
            c.value_bound = value_bound;
            return proto::make_protocol(algorithm, nullptr, std::move(c));
        },
        o);
}

bool finite(const std::vector<float>& v) {
    return !first_non_finite(v).has_value();
}

}  // namespace

TEST_CASE("non-finite: a NaN in a neighbour's message is refused, its sender named and failed") {
    for (const std::string algorithm : kAlgorithms) {
        CAPTURE(algorithm);
        auto h = make_job(algorithm);
        // Rank 2 checks nothing it sends from round 10 on: a faulty link or a peer that is not
        // a gossamer peer. Float NaN words are also NaN to choco's fp16 codec.
        h->tamper = [](proto::Message& m) {
            if (m.sender == kBad && m.round >= 10 && m.kind != proto::MessageKind::control &&
                m.payload.size() > 1)
                m.payload[1] = kNaN;
        };
        // Rank 2 itself waits for ever for neighbours that failed it: run until the others end.
        h->run([&] {
            for (int r = 0; r < kN; ++r)
                if (r != kBad && !h->protocol(r).done()) return false;
            return true;
        });
        const int next = (kBad + 1) % kN;
        for (int r = 0; r < kN; ++r) {
            if (r == kBad) continue;
            CAPTURE(r);
            CHECK(finite(h->model(r)));  // nothing of it was mixed in
            CHECK_FALSE(h->protocol(r).refused_peer(r));
        }
        // Who hears from rank 2 refuses it: its ring neighbours (the all-reduce: the next one).
        const std::vector<int> hearers =
            algorithm == "allreduce" ? std::vector<int>{next} : std::vector<int>{kBad - 1, next};
        for (int r : hearers) {
            CAPTURE(r);
            CHECK(h->protocol(r).refused_peer(kBad));
            CHECK(h->protocol(r).stats().messages_refused >= 1);
        }
        if (algorithm == "allreduce") {
            CHECK(h->protocol(next).done());  // it stops, naming rank 2 (failed_rank)
        } else {
            // Gossip goes on without it: everyone else ends.
            for (int r = 0; r < kN; ++r)
                if (r != kBad) CHECK(h->protocol(r).done());
        }
    }
}

TEST_CASE("non-finite: a peer whose update became NaN stops before it sends it (Diverged)") {
    for (const std::string algorithm : kAlgorithms) {
        CAPTURE(algorithm);
        // Rank 2's gradient of its 10th step holds a NaN; its loss is finite. dpsgd, sgp,
        // async and choco send the updated model, allreduce the gradient: the send finds it.
        auto h = make_job(algorithm, [](int rank, std::int64_t step, std::span<float> g) {
            if (rank == kBad && step == 10) g[3] = kNaN;
        });
        std::string what;
        try {
            h->run();
        } catch (const Diverged& e) {
            what = e.what();
        }
        CHECK(what.find("rank 2") != std::string::npos);
        CHECK(what.find("its own model became non-finite") != std::string::npos);
        CHECK(what.find("NaN at element") != std::string::npos);
        CHECK(what.find('\n') == std::string::npos);
        for (int r = 0; r < kN; ++r) {
            CAPTURE(r);
            if (r != kBad) CHECK(finite(h->model(r)));
        }
    }
}

TEST_CASE("non-finite: an infinite loss stops the peer with one line naming it and the step") {
    // Rank 1's model becomes infinite through its gradient; its next loss is infinite. The
    // all-reduce sends the gradient (the send check finds it first), so dpsgd with
    // partition-free sends of x is the case where either may come first: both are Diverged.
    for (const std::string algorithm : {"dpsgd", "allreduce"}) {
        CAPTURE(algorithm);
        auto h = make_job(algorithm, [](int rank, std::int64_t step, std::span<float> g) {
            if (rank == 1 && step == 4) g[0] = -std::numeric_limits<float>::infinity();
        });
        try {
            h->run();
            FAIL("no Diverged");
        } catch (const Diverged& e) {
            const std::string what = e.what();
            CHECK(what.rfind("rank 1: ", 0) == 0);
            CHECK(what.find("inf at element 0") != std::string::npos);
        }
    }
    // A loss that is not finite itself: the exact line.
    StandInWorker w(
        {1.0f}, [](std::int64_t, std::span<const float> at, std::span<float> g) { g[0] = at[0]; });
    proto::PeerContext c;
    c.rank = 0;
    c.n = 2;
    c.worker = &w;
    c.max_steps = 3;
    topology::FamilySpec f;
    f.family = "ring";
    f.n = 2;
    c.topology = topology::generate(f);
    auto p = proto::make_protocol("dpsgd", nullptr, c);
    proto::Actions a;
    p->start(0, a);
    REQUIRE(a.start_step);
    proto::Actions b;
    try {
        p->step_finished(1, std::numeric_limits<double>::infinity(), b);
        FAIL("no Diverged");
    } catch (const Diverged& e) {
        CHECK(std::string(e.what()) ==
              "rank 0: the training loss became infinite at step 0; this peer stops, sends "
              "nothing more and writes no result (lower optimizer.lr, add a warm-up or gradient "
              "clipping)");
    }
}

TEST_CASE("non-finite: a runaway value is refused only under guard.value_bound") {
    for (const std::string algorithm : {"dpsgd", "sgp", "async"}) {
        CAPTURE(algorithm);
        for (const double bound : {0.0, 100.0}) {
            CAPTURE(bound);
            auto h = make_job(algorithm, {}, bound);
            // Finite, but a million times what any peer holds (the targets are 1 to 4).
            h->tamper = [](proto::Message& m) {
                if (m.sender == kBad && m.round >= 10 && m.kind != proto::MessageKind::control &&
                    m.payload.size() > 1)
                    m.payload[1] = 4e6f;
            };
            h->run([&] {
                for (int r = 0; r < kN; ++r)
                    if (r != kBad && !h->protocol(r).done()) return false;
                return true;
            });
            for (int r : {kBad - 1, (kBad + 1) % kN}) {
                CAPTURE(r);
                CHECK(h->protocol(r).refused_peer(kBad) == (bound > 0));
            }
            // Off, the runaway value reaches the models; on, nobody's model ever sees it.
            double largest = 0;
            for (int r = 0; r < kN; ++r)
                if (r != kBad)
                    for (float v : h->model(r)) largest = std::max(largest, double(std::fabs(v)));
            if (bound > 0) CHECK(largest < 10);
            if (bound == 0) CHECK(largest > 1000);
        }
    }
}

TEST_CASE("non-finite: every compressor finds the NaN or infinity its encoded words carry") {
    const std::size_t n = 600;
    std::vector<float> x(n);
    for (std::size_t k = 0; k < n; ++k) x[k] = std::sin(0.1f * static_cast<float>(k));
    for (const auto kind : {optim::CompressorKind::fp16, optim::CompressorKind::int8,
                            optim::CompressorKind::topk, optim::CompressorKind::randomk}) {
        optim::CompressorConfig cfg;
        cfg.kind = kind;
        cfg.fraction = 1.0;  // random-k keeps every value: the bad one is among them
        const auto q = optim::make_compressor(cfg);
        CAPTURE(optim::to_string(kind));
        std::vector<std::byte> out(q->encoded_bytes(n));
        q->encode(x, {}, out);
        CHECK_FALSE(q->first_non_finite(out, n).has_value());
        auto bad = x;
        bad[300] = std::numeric_limits<float>::infinity();  // int8: its block's scale is inf
        q->encode(bad, {}, out);
        const auto found = q->first_non_finite(out, n);
        REQUIRE(found.has_value());
        CHECK(std::isinf(found->second));
        if (kind != optim::CompressorKind::int8) CHECK(found->first == 300);
        if (kind == optim::CompressorKind::int8) CHECK(found->first == 300 / 256 * 256);
        CHECK_FALSE(q->first_non_finite(std::span(out).first(out.size() - 1), n).has_value());
    }
}
