// The real-time driver on four peers as threads: consensus, metrics and emulated stragglers.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <thread>

#include "gossamer/core/metrics.hpp"
#include "gossamer/optimizers/protocol/registry.hpp"
#include "gossamer/peer/compute_thread.hpp"
#include "optimizers/harness/network.hpp"
#include "peers.hpp"
#include "support/stderr_capture.hpp"

using namespace peer_test;
using gossamer::testing::QuadraticWorker;

namespace {

std::vector<proto::LocalWorker*> locals(const gossamer::testing::Network& net) {
    return net.locals();
}

}  // namespace

namespace {

constexpr int kAsyncPeers = 4;
constexpr std::int64_t kAsyncSteps = 40;
constexpr double kFastStep = 0.005;  // seconds per step of a fast peer

gossamer::testing::Network async_network() {
    return gossamer::testing::make_network(
        family("exponential", kAsyncPeers, topology::WeightRule::push_sum), kAsyncSteps,
        [](const json::Node* o, proto::PeerContext c) {
            return proto::make_protocol("async", o, std::move(c));
        },
        nullptr,
        [](int r) {
            return std::make_unique<QuadraticWorker>(
                gossamer::testing::random_vector(16, 200 + static_cast<std::uint64_t>(r)), 1.0);
        });
}

// Rank `slow` declares 4x the fast peers' step time.
std::function<peer::DriverOptions(int)> straggler_options(int slow) {
    return [slow](int r) {
        peer::DriverOptions o;
        o.run_timeout = peer::Millis(20'000);
        const double declared = r == slow ? 4 * kFastStep : kFastStep;
        o.declared_step_time = [declared](std::int64_t, double) { return declared; };
        return o;
    };
}

double total_mass(const gossamer::testing::Network& net) {
    double sum = 0;
    for (const auto* p : net.protocols()) sum += p->mass();
    return sum;
}

}  // namespace

TEST_CASE("dpsgd consensus-only: four real-time peers agree to 1e-4 and keep the average") {
    const int n = 4;
    const std::int64_t steps = 60;
    auto net = gossamer::testing::make_network(
        family("ring", n, topology::WeightRule::uniform), steps,
        [](const json::Node* o, proto::PeerContext c) {
            return proto::make_protocol("dpsgd", o, std::move(c));
        },
        nullptr,
        [](int r) {
            return std::make_unique<QuadraticWorker>(
                gossamer::testing::random_vector(16, 100 + static_cast<std::uint64_t>(r)));
        });
    const auto before = gossamer::testing::mean_of(net.models());
    // One folder per process: ctest and a stress loop may run this binary twice at once.
    const auto dir = std::filesystem::temp_directory_path() /
                     fmt::format("gossamer_peer_consensus_{}", ::getpid());
    const auto out = run_peers(net.protocols(), locals(net), [&](int r) {
        peer::DriverOptions o;
        o.run_timeout = peer::Millis(20'000);
        o.metrics_path = (dir / fmt::format("peer{}.jsonl", r)).string();
        return o;
    });
    for (const auto& o : out) {
        REQUIRE(o.error == "");
        REQUIRE(o.result);
        CHECK(o.result->steps == steps);
        CHECK(o.result->failed_peers.empty());
        CHECK(o.result->stats.bytes_sent > 0);
        CHECK(o.seconds < 20);
    }
    const auto models = net.models();
    CHECK(gossamer::testing::disagreement(models) < 1e-4);
    CHECK(gossamer::testing::max_abs_diff(gossamer::testing::mean_of(models), before) < 1e-4);

    // Metrics: one line per step (step, time, loss), then the summary with traffic and edges.
    const auto lines = read_json_lines((dir / "peer1.jsonl").string());
    REQUIRE(lines.size() == static_cast<std::size_t>(steps + 1));
    double last = 0;
    for (std::size_t i = 0; i + 1 < lines.size(); ++i) {
        CHECK(lines[i]["step"].get<std::int64_t>() == static_cast<std::int64_t>(i));
        CHECK(lines[i]["time"].get<double>() >= last);
        last = lines[i]["time"].get<double>();
        CHECK(lines[i].contains("loss"));
    }
    const auto& sum = lines.back();
    CHECK(sum["summary"].get<bool>());
    CHECK(sum["algorithm"] == "dpsgd");
    CHECK(sum["bytes_sent"].get<std::uint64_t>() == out[1].result->stats.bytes_sent);
    CHECK(sum["bytes_received"].get<std::uint64_t>() > 0);
    CHECK(sum.contains("edges"));
    std::filesystem::remove_all(dir);
}

TEST_CASE("async: a peer padded 4x slower does not hold the fast peers back") {
    const int n = kAsyncPeers;
    const std::int64_t steps = kAsyncSteps;
    const double base = kFastStep;
    const int slow = 3;
    auto net = async_network();
    const auto out = run_peers(net.protocols(), locals(net), straggler_options(slow));
    for (const auto& o : out) {
        REQUIRE(o.error == "");
        REQUIRE(o.result);
        CHECK(o.result->steps == steps);
    }
    const auto& s = *out[slow].result;
    CHECK(s.busy >= steps * 4 * base * 0.99);
    for (int r = 0; r < n; ++r) {
        if (r == slow) continue;
        const auto& f = *out[static_cast<std::size_t>(r)].result;
        CAPTURE(r);
        // Steps padded to their own declared time only, and no waiting for the straggler: a
        // peer that waited would take the straggler's 4x on every step. A loaded machine may
        // delay one step that long now and then, so a tenth of the steps may.
        const auto waited = std::count_if(f.step_log.begin(), f.step_log.end(),
                                          [&](const auto& st) { return st.took >= 4 * base; });
        CHECK(f.busy < steps * base * 1.5);
        CHECK(waited <= steps / 10);
        CHECK(f.end_time < 0.5 * s.end_time);
        CHECK(f.idle < 0.5 * f.end_time);
    }
}

TEST_CASE("async: finished peers absorb a straggler's last shares, so the total mass is n") {
    // A fast peer that finished keeps taking the shares already on their way to it until every
    // in-neighbour said how many it sent in all (docs/modules/peer.md, "Leaving").
    auto net = async_network();
    const auto out = run_peers(net.protocols(), locals(net), straggler_options(3));
    for (const auto& o : out) {
        REQUIRE(o.error == "");
        REQUIRE(o.result);
        CHECK(o.result->steps == kAsyncSteps);
        CHECK(o.result->failed_peers.empty());
    }
    CHECK(total_mass(net) == doctest::Approx(kAsyncPeers).epsilon(1e-12));
    for (const auto* p : net.protocols()) {
        CHECK(p->settled());
        CHECK(p->settling_on().empty());
    }
}

TEST_CASE("async: past settle_timeout a finished peer stops waiting and says for whom") {
    auto net = async_network();
    gossamer::test::StderrCapture err;
    const auto out = run_peers(net.protocols(), locals(net), [](int r) {
        auto o = straggler_options(3)(r);
        o.settle_timeout = peer::Millis(1);
        if (r == 3) o.declared_step_time = [](std::int64_t, double) { return 0.05; };
        return o;
    });
    for (const auto& o : out) {
        REQUIRE(o.error == "");
        REQUIRE(o.result);
    }
    CHECK(err.text().find("stopped waiting for the last messages of peers") != std::string::npos);
}

TEST_CASE("link pacing: sends wait for their emulated link's latency and bandwidth") {
    const int n = 4;
    const std::int64_t steps = 10;
    const int messages = 2 * (n - 1);  // one ring all-reduce per step, one after another
    const std::size_t size = 1000;
    const double wire = 4.0 * size / n + 88;  // bytes of one chunk message
    for (const bool latency : {true, false}) {
        CAPTURE(latency);
        auto net = gossamer::testing::make_network(
            family("ring", n, topology::WeightRule::uniform), steps,
            [](const json::Node* o, proto::PeerContext c) {
                return proto::make_protocol("allreduce", o, std::move(c));
            },
            nullptr,
            [&](int r) {
                // The same start on every peer (all-reduce keeps the models equal), its own
                // target.
                return std::make_unique<QuadraticWorker>(
                    gossamer::testing::random_vector(size, 500), 1.0,
                    gossamer::testing::random_vector(size, 600 + static_cast<std::uint64_t>(r)));
            });
        const double per_message = 0.005;
        const auto out = run_peers(net.protocols(), locals(net), [&](int) {
            peer::DriverOptions o;
            o.run_timeout = peer::Millis(20'000);
            o.link = [&](int) {
                return latency ? peer::LinkPacing{per_message, 0}
                               : peer::LinkPacing{0, wire / per_message};
            };
            return o;
        });
        for (const auto& o : out) {
            REQUIRE(o.error == "");
            REQUIRE(o.result);
            CHECK(o.result->steps == steps);
            CHECK(o.result->end_time >= steps * messages * per_message * 0.99);
            CHECK(o.seconds < 10);
        }
        CHECK(gossamer::testing::disagreement(net.models()) < 1e-6);
    }
}

TEST_CASE("a slow period: steps that begin inside it are padded to its declared time") {
    const int n = 4;
    const std::int64_t steps = 30;
    const double slow_until = 0.15, slow = 0.02, fast = 0.002;
    auto net = gossamer::testing::make_network(
        family("exponential", n, topology::WeightRule::push_sum), steps,
        [](const json::Node* o, proto::PeerContext c) {
            return proto::make_protocol("async", o, std::move(c));
        },
        nullptr,
        [](int r) {
            return std::make_unique<QuadraticWorker>(
                gossamer::testing::random_vector(8, 700 + static_cast<std::uint64_t>(r)), 1.0);
        });
    const auto out = run_peers(net.protocols(), locals(net), [&](int) {
        peer::DriverOptions o;
        o.run_timeout = peer::Millis(20'000);
        o.declared_step_time = [=](std::int64_t, double start) {
            return start < slow_until ? slow : fast;
        };
        return o;
    });
    for (const auto& o : out) {
        REQUIRE(o.error == "");
        REQUIRE(o.result);
        int inside = 0, after = 0;
        for (const auto& st : o.result->step_log) {
            const double start = st.time - st.took;
            if (start < slow_until - 0.005) {
                ++inside;
                CHECK(st.took >= slow * 0.99);
            } else if (start > slow_until + 0.005) {
                ++after;
                CHECK(st.took < slow * 0.75);
            }
        }
        CHECK(inside >= 3);
        CHECK(after >= 3);
    }
}

TEST_CASE("a step declared to take 1e10 s or more is padded, not cut to its natural time") {
    // 1e10 s is past the clock's int64 nanoseconds: converted unbounded it wrapped to a time in
    // the past and the step was not padded at all.
    for (const double declared : {1e10, 1e300}) {
        CAPTURE(declared);
        gossamer::proto::CostOnlyWorker worker(4);
        std::vector<float> at(4);
        std::atomic<int> woken{0};
        auto t = std::make_unique<gossamer::peer::ComputeThread>(
            worker, [declared](std::int64_t, double) { return declared; }, [&] { ++woken; });
        t->start_on_comm(0, 0.0, at);
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        CHECK_FALSE(t->take_done_on_comm().has_value());  // still padding
        CHECK(woken == 0);
        const auto t0 = std::chrono::steady_clock::now();
        t.reset();  // a stop cuts the padding short
        CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
    }
}
