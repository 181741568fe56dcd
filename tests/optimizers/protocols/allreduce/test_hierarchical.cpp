// The rack-aware all-reduce (hierarchical.hpp): the same average as the ring to float rounding,
// the same bits on every peer, the bytes its schedule says, cost-only headers, refusals.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocols/allreduce/allreduce.hpp"
#include "gossamer/optimizers/protocols/allreduce/hierarchical.hpp"
#include "optimizers/harness/harness.hpp"
#include "optimizers/harness/workers.hpp"

using namespace gossamer;
using namespace gossamer::proto;
using gossamer::testing::Harness;
using gossamer::testing::HarnessOptions;
using gossamer::testing::StandInWorker;

namespace {

// Random gradients, a fixed table per (rank, step), so the ring and the hierarchy see the same.
struct Grads {
    std::vector<std::vector<float>> table;  // [rank * steps + t][i]
    int steps;
    Grads(int n, int steps_, std::size_t length, unsigned seed) : steps(steps_) {
        std::mt19937 gen(seed);
        std::normal_distribution<float> d(0.0f, 1.0f);
        for (int k = 0; k < n * steps; ++k) {
            table.emplace_back(length);
            for (float& v : table.back()) v = d(gen);
        }
    }
};

Harness run_of(int n, std::size_t length, const Grads& g, AllreduceOptions o, bool shuffle,
               bool cost_only = false) {
    std::vector<std::unique_ptr<LocalWorker>> workers;
    for (int r = 0; r < n; ++r) {
        if (cost_only) {
            workers.push_back(std::make_unique<CostOnlyWorker>(length));
            continue;
        }
        workers.push_back(std::make_unique<StandInWorker>(
            std::vector<float>(length, 0.5f),
            [r, &g](std::int64_t t, std::span<const float>, std::span<float> out) {
                const auto& row = g.table[static_cast<std::size_t>(r * g.steps + t)];
                std::copy(row.begin(), row.end(), out.begin());
            }));
    }
    HarnessOptions ho;
    ho.check_edge_seq = true;
    ho.max_steps = g.steps;
    ho.shuffle = shuffle;
    ho.seed = 11;
    return Harness(
        std::move(workers),
        [o](PeerContext ctx) -> std::unique_ptr<Protocol> {
            if (o.rack_size > 0) return std::make_unique<HierarchicalAllreduce>(std::move(ctx), o);
            return std::make_unique<AllreduceProtocol>(std::move(ctx), o);
        },
        ho);
}

}  // namespace

TEST_CASE("hierarchy: the ring's average to float rounding and the same bits everywhere") {
    const int n = 8;
    for (std::size_t length : {std::size_t(5), std::size_t(37), std::size_t(64)}) {
        const Grads g(n, 3, length, 17 + static_cast<unsigned>(length));
        Harness ring = run_of(n, length, g, {}, false);
        REQUIRE(ring.run());
        for (int k : {1, 2, 4, 8}) {
            for (bool shuffle : {false, true}) {
                CAPTURE(length);
                CAPTURE(k);
                CAPTURE(shuffle);
                AllreduceOptions o;
                o.rack_size = k;
                Harness h = run_of(n, length, g, o, shuffle);
                REQUIRE(h.run());
                double worst = 0;
                for (int r = 0; r < n; ++r) {
                    const auto& got = dynamic_cast<const StandInWorker&>(h.worker(r)).applied();
                    const auto& want = dynamic_cast<const StandInWorker&>(ring.worker(r)).applied();
                    REQUIRE(got.size() == want.size());
                    for (std::size_t t = 0; t < got.size(); ++t)
                        for (std::size_t i = 0; i < length; ++i)
                            worst = std::max(worst, double(std::fabs(got[t][i] - want[t][i])));
                    CHECK(h.model(r) == h.model(0));  // bitwise
                    CHECK(h.protocol(r).stats().rounds == 3);
                    CHECK(h.protocol(r).stats().messages_sent ==
                          std::uint64_t(3 * hier_steps(n, k)));
                }
                CHECK(worst <= 1e-6);
                // Elements sent per all-reduce: 2 (k - 1) / k + 2 (R - 1) / n of the vector,
                // exactly when the parts divide evenly.
                std::uint64_t elements = 0;
                for (const auto& m : h.sent()) elements += m.elements;
                if (length == 64) {
                    const std::uint64_t per = 2 * (k - 1) * (64 / k) + 2 * (n / k - 1) * (64 / n);
                    CHECK(elements == 3 * n * per);
                }
            }
        }
    }
}

TEST_CASE("hierarchy: n = 12 in racks of 3 (R = 4 and uneven parts)") {
    const Grads g(12, 2, 29, 5);
    Harness ring = run_of(12, 29, g, {}, false);
    REQUIRE(ring.run());
    AllreduceOptions o;
    o.rack_size = 3;
    Harness h = run_of(12, 29, g, o, true);
    REQUIRE(h.run());
    for (int r = 0; r < 12; ++r) {
        const auto& got = dynamic_cast<const StandInWorker&>(h.worker(r)).applied();
        const auto& want = dynamic_cast<const StandInWorker&>(ring.worker(r)).applied();
        for (std::size_t t = 0; t < 2; ++t)
            for (std::size_t i = 0; i < 29; ++i) CHECK(std::fabs(got[t][i] - want[t][i]) <= 1e-6);
    }
}

TEST_CASE("hierarchy: only phase B leaves the rack and cost-only sends the same headers") {
    const int n = 8, k = 4;
    const Grads g(n, 2, 40, 3);
    AllreduceOptions o;
    o.rack_size = k;
    Harness real = run_of(n, 40, g, o, false);
    Harness cost = run_of(n, 40, g, o, false, true);
    REQUIRE(real.run());
    REQUIRE(cost.run());
    for (const auto& m : real.sent()) {
        const int t = static_cast<int>(m.chunk);
        const bool across = t >= k - 1 && t < k - 1 + 2 * (n / k - 1);
        CHECK((m.sender / k != m.receiver / k) == across);
        if (across) CHECK(m.receiver % k == m.sender % k);
    }
    REQUIRE(real.sent().size() == cost.sent().size());
    for (int r = 0; r < n; ++r)
        CHECK(cost.protocol(r).stats().bytes_sent == real.protocol(r).stats().bytes_sent);
    for (const auto& m : cost.sent()) CHECK(m.payload.empty());
}

TEST_CASE("hierarchy options: bad rack sizes and combinations get ConfigError naming the path") {
    const json::Document doc = json::parse_text(R"({
        "ok": {"hierarchy": {"rack_size": 2}}, "three": {"hierarchy": {"rack_size": 3}},
        "zero": {"hierarchy": {"rack_size": 0}}, "typo": {"hierarchy": {"racks": 2}},
        "chunks": {"chunks": 2, "hierarchy": {"rack_size": 2}},
        "elastic": {"elastic": "rebuild", "hierarchy": {"rack_size": 2}}})",
                                                "train.json");
    const json::Node root(doc);
    CostOnlyWorker worker(10);
    const PeerContext ctx{0, 8, nullptr, &worker, 5};
    const auto path_of = [&](const char* key) -> std::string {
        const json::Node node = root.at(key);
        try {
            make_allreduce(&node, ctx);
        } catch (const ConfigError& e) {
            return e.path();
        }
        return "(no error)";
    };
    CHECK(path_of("ok") == "(no error)");
    CHECK(path_of("three") == "three.hierarchy.rack_size");  // 3 does not divide 8
    CHECK(path_of("zero") == "zero.hierarchy.rack_size");
    CHECK(path_of("typo") == "typo.hierarchy.racks");
    CHECK(path_of("chunks") == "chunks.chunks");
    CHECK(path_of("elastic") == "elastic.elastic");
}
