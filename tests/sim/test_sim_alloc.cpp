// The simulator's allocation guard (issue 39; docs/operations/testing.md, "Allocation guard"):
// every registered algorithm runs in cost mode at 16,384 peers for a few steps, and the bytes
// the simulator and the protocols allocate per peer, counted by this binary's own operator new
// (alloc_counter.cpp), stay within the bounds recorded in tests/sim/alloc_bounds.json.
// Deterministic: a counter of requested sizes on the run's own thread, not time or RSS.
//   GOSSAMER_RECORD_ALLOC=1 build/ci/tests/sim/test_sim_alloc   re-records the file
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <fstream>
#include <thread>
#include <vector>

#include "alloc_bounds.hpp"
#include "alloc_counter.hpp"
#include "gossamer/core/cluster.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocol/registry.hpp"
#include "gossamer/sim/simulation.hpp"
#include "gossamer/topology/schedule.hpp"
#include "support/temp_dir.hpp"

using namespace gossamer;
using gossamer::test::AllocBounds;
using gossamer::test::AllocCounts;
using gossamer::test::AllocEntry;
using gossamer::test::AllocFigures;
using gossamer::test::CountingScope;

namespace {

#ifdef NDEBUG
constexpr const char* kBuild = "optimised, asserts off (ci preset)";
#else
constexpr const char* kBuild = "asserts on (debug)";
#endif
constexpr double kStepTime = 0.01;
const std::string kBoundsFile = std::string(GOSSAMER_SOURCE_DIR) + "/tests/sim/alloc_bounds.json";

// Runs f on a thread of its own: thread_local scratch of an earlier run (async's) neither
// lowers nor raises this run's count.
template <class F>
void on_fresh_thread(F&& f) {
    std::exception_ptr error;
    std::thread t([&] {
        try {
            f();
        } catch (...) {
            error = std::current_exception();
        }
    });
    t.join();
    if (error) std::rethrow_exception(error);
}

// The graphs an algorithm may run on, in the order tried: a chain in rank order (gadmm) is a
// ring.
struct Choice {
    const char* family;
    topology::WeightRule rule;
    const char* label;
};
// Push-sum weights first, as bench/sim_scaling.py gives push-sum protocols: sgp checks uniform
// weights for column sums, O(n) per peer and round, which at 16,384 peers takes 40 s.
const Choice kChoices[] = {
    {"one_peer_exponential", topology::WeightRule::push_sum, "one_peer_exponential, push_sum"},
    {"one_peer_exponential", topology::WeightRule::uniform, "one_peer_exponential, uniform"},
    {"ring", topology::WeightRule::push_sum, "ring, push_sum"},
    {"ring", topology::WeightRule::uniform, "ring, uniform"},
};

sim::SimResult run(const std::string& algo, const Choice& c, int n, int steps,
                   AllocCounts* counts) {
    topology::FamilySpec fam;
    fam.family = c.family;
    fam.n = n;
    fam.weights = c.rule;
    auto topo = topology::generate(fam);
    // bench/sim_scaling.py's cluster: homogeneous 10 ms steps, 0.1 ms and 1 GB/s links.
    const Cluster cluster = homogeneous_cluster(n, kStepTime, 1e-4, 1e9);
    sim::SimSetup s;
    s.algorithm = algo;
    s.topology = topo;
    s.cluster = &cluster;
    s.failure_detection = cluster.failure_detection;
    s.mode = sim::Mode::cost;
    s.model_size = 1'000'000;
    s.steps = steps;
    s.peer_records_every = 0;  // --peer-metrics none: the simulator's state, not its JSON
    if (!counts) return sim::simulate(s);
    CountingScope scope;
    auto result = sim::simulate(s);
    *counts = scope.counts();
    return result;
}

// The first graph the algorithm runs on, tried with 16 peers; throws naming every refusal.
const Choice& choose(const std::string& algo) {
    std::string refusals;
    for (const Choice& c : kChoices) {
        try {
            run(algo, c, 16, 2, nullptr);
            return c;
        } catch (const Error& e) {
            refusals += fmt::format("; {}: {}", c.label, e.what());
        }
    }
    throw std::runtime_error(algo + " runs on none of the guard's graphs" + refusals);
}

std::string now_utc() {
    const std::time_t t = std::time(nullptr);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
    return buf;
}

std::string source_commit() {
    const std::string cmd =
        fmt::format("git -C '{}' rev-parse --short HEAD 2>/dev/null", GOSSAMER_SOURCE_DIR);
    std::string out;
    if (FILE* p = popen(cmd.c_str(), "r")) {
        char buf[64];
        while (std::fgets(buf, sizeof buf, p)) out += buf;
        pclose(p);
    }
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    return out.empty() ? "unknown" : out;
}

// allreduce-like algorithms are not gossip: 2(n - 1) messages a peer a step.
AllocBounds default_bounds() {
    AllocBounds b;
    const std::string why =
        "not gossip: a ring all-reduce sends 2(n-1) messages a peer a step (5.4e8 events a step "
        "at 16,384 peers), so it is guarded at 64 peers";
    for (const char* name : {"allreduce", "qallreduce"}) b.algorithms[name] = {64, why, "", {}, {}};
    return b;
}

}  // namespace

TEST_CASE("the counter counts the bytes this thread requests and their peak and its frees") {
    AllocCounts c;
    std::vector<int>* kept = nullptr;
    {
        CountingScope scope;
        {
            std::vector<char> a(1000);
            std::vector<char> b(3000);
        }
        kept = new std::vector<int>(250);  // 1,000 bytes and the vector's own 24
        auto* aligned = new (std::align_val_t{64}) double[10];
        operator delete[](aligned, std::align_val_t{64});
        // Another thread's allocations are not this scope's.
        std::thread([] { std::vector<char> other(1 << 20); }).join();
        c = scope.counts();
        CHECK_THROWS_AS(CountingScope(), std::logic_error);
    }
    CHECK(c.allocated >= 1000 + 3000 + 1000 + sizeof(std::vector<int>) + 80);
    CHECK(c.allocated < 1000 + 3000 + 1000 + sizeof(std::vector<int>) + 80 + 1024);
    CHECK(c.peak >= 4000);
    CHECK(c.peak < (1 << 20));
    CHECK(c.live >= static_cast<std::int64_t>(1000 + sizeof(std::vector<int>)));
    CHECK(c.live < 2000);
    CHECK(c.allocations >= 5);
    delete kept;
}

TEST_CASE("a figure over its bound fails in one line naming the algorithm and figure and bound") {
    AllocBounds b;
    auto entry = test::record_entry({16384, "", "ring, uniform", {}, {}}, {1000, 5000, 10}, 0.1);
    CHECK(entry.bound->peak_bytes == 1100);
    CHECK(test::check_alloc("sgp", b, entry, {1100, 5500, 11}).empty());
    const auto lines = test::check_alloc("sgp", b, entry, {1234.4, 5000, 10});
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].find("sgp") != std::string::npos);
    CHECK(lines[0].find("peak_bytes 1,234 per peer > bound 1,100 (recorded 1,000 + 10%)") !=
          std::string::npos);
    CHECK(lines[0].find(test::kRecordCommand) != std::string::npos);
    CHECK(lines[0].find('\n') == std::string::npos);
    CHECK(test::check_alloc("sgp", b, entry, {2000, 9000, 20}).size() == 3);
    const auto missing =
        test::check_alloc("new_algo", b, AllocEntry{16384, "", "", {}, {}}, {1, 1, 1});
    REQUIRE(missing.size() == 1);
    CHECK(missing[0].find("new_algo has no recorded bound") != std::string::npos);
    CHECK(test::improvement_note("sgp", entry, {1000, 5000, 10}, 0.1).empty());
    CHECK(test::improvement_note("sgp", entry, {700, 5000, 10}, 0.1).find("peak_bytes 700") !=
          std::string::npos);
}

TEST_CASE("a bounds file that is missing or ill-formed is one line naming it and the fix") {
    test::TempDir dir;
    auto message = [](const std::string& path) {
        try {
            test::load_alloc_bounds(path);
        } catch (const std::runtime_error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    const auto gone = message((dir.path() / "absent.json").string());
    CHECK(gone.find("absent.json: cannot be read") != std::string::npos);
    CHECK(gone.find(test::kRecordCommand) != std::string::npos);
    CHECK(message(dir.write("a.json", "{")).find("a.json: not JSON") != std::string::npos);
    CHECK(message(dir.write("b.json", "{\"algorithms\": []}")).find("\"algorithms\" must be") !=
          std::string::npos);
    CHECK(message(dir.write("c.json", R"({"algorithms": {"sgp": {"recorded": {}}}})"))
              .find("algorithms.sgp needs both") != std::string::npos);
    CHECK(message(dir.write("d.json",
                            R"({"algorithms": {"sgp": {"recorded": {"peak_bytes": 1},
                                "bound": {"peak_bytes": 1}}}})"))
              .find("algorithms.sgp.recorded.allocated_bytes must be a number") !=
          std::string::npos);
    // What to_json writes, parse_alloc_bounds reads back.
    auto b = default_bounds();
    b.algorithms["sgp"] =
        test::record_entry({b.peers, "", "ring, uniform", {}, {}}, {1, 2, 3}, 0.1);
    const auto back = test::parse_alloc_bounds(test::to_json(b).dump(), "x.json");
    CHECK(test::to_json(back) == test::to_json(b));
    CHECK(back.algorithms.at("allreduce").peers == 64);
}

TEST_CASE(
    "every algorithm in cost mode at 16384 peers stays within its bytes per peer in "
    "alloc_bounds.json") {
    const bool record = std::getenv("GOSSAMER_RECORD_ALLOC") != nullptr;
    AllocBounds bounds;
    try {
        bounds = test::load_alloc_bounds(kBoundsFile);
    } catch (const std::runtime_error& e) {
        if (!record) FAIL(std::string(e.what()));
        bounds = default_bounds();
    }
    AllocBounds recorded = bounds;
    for (const auto& algo : proto::protocol_names()) {
        AllocEntry entry = bounds.algorithms.contains(algo)
                               ? bounds.algorithms.at(algo)
                               : AllocEntry{bounds.peers, "", "", {}, {}};
        const Choice& choice = choose(algo);
        AllocCounts counts;
        sim::SimResult result;
        const auto t0 = std::chrono::steady_clock::now();
        on_fresh_thread([&] { result = run(algo, choice, entry.peers, bounds.steps, &counts); });
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        // A run that stopped early would allocate little and pass: every peer computed every
        // step (its busy time; qallreduce's cost-mode worker counts no steps).
        REQUIRE(result.peers.size() == static_cast<std::size_t>(entry.peers));
        for (const auto& p : result.peers) REQUIRE(p.busy >= bounds.steps * kStepTime * 0.999);
        const double n = entry.peers;
        const AllocFigures got{static_cast<double>(counts.peak) / n,
                               static_cast<double>(counts.allocated) / n,
                               static_cast<double>(counts.allocations) / n};
        std::printf(
            "%-10s %6d peers x %d steps (%s): peak %9.1f B, allocated %10.1f B, "
            "%8.1f allocations per peer (%.2f s)\n",
            algo.c_str(), entry.peers, bounds.steps, choice.label, got.peak_bytes,
            got.allocated_bytes, got.allocations, seconds);
        if (record) {
            entry.topology = choice.label;
            recorded.algorithms[algo] = test::record_entry(entry, got, bounds.headroom);
            continue;
        }
        if (!entry.topology.empty() && entry.topology != choice.label)
            FAIL_CHECK(
                fmt::format("sim alloc guard: {} now runs on {}, recorded on {}; "
                            "re-record with {}",
                            algo, choice.label, entry.topology, test::kRecordCommand));
        for (const auto& line : test::check_alloc(algo, bounds, entry, got)) FAIL_CHECK(line);
        const auto note = test::improvement_note(algo, entry, got, bounds.headroom);
        if (!note.empty()) MESSAGE(note);
    }
    if (!record) return;
    for (auto it = recorded.algorithms.begin(); it != recorded.algorithms.end();)
        it = proto::find_algorithm(it->first) ? std::next(it) : recorded.algorithms.erase(it);
    recorded.recorded_with = {{"date", now_utc()},
                              {"commit", source_commit()},
                              {"compiler", __VERSION__},
                              {"build", kBuild}};
    std::ofstream(kBoundsFile) << test::to_json(recorded).dump(2) << "\n";
    std::printf("recorded %s\n", kBoundsFile.c_str());
}
