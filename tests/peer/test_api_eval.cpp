// gossamer::Peer's evaluation points (PeerOptions::eval_interval, evaluation_due,
// record_evaluation): the lines gossamer peer writes, in the peer's metrics file, one per tick.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "api_peers.hpp"
#include "gossamer/core/error.hpp"

using namespace api_test;
using Json = nlohmann::json;

TEST_CASE("a peer with an eval interval writes one evaluation point per tick it reaches") {
    test::TempDir dir;
    const int n = 2;
    const auto path = topology_file(dir, "ring", n, topology::WeightRule::uniform);
    auto job = make_inproc_job(n);
    const auto metrics = [&](int r) {
        return (dir.path() / ("peer" + std::to_string(r) + ".jsonl")).string();
    };
    auto out = run_loops(n, [&](int r, LoopOutcome& me) {
        auto o = inproc_options(path, r, "dpsgd", 40, job);
        o.eval_interval = 0.02;
        o.metrics_path = metrics(r);
        std::vector<float> p(6, 1.0f);
        Peer peer(o, p);
        CHECK_THROWS_WITH_AS(peer.record_evaluation(0.5, 1.0),
                             doctest::Contains("without a point due"), Error);
        int step = 0;
        do {
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
            p[0] -= 0.01f;
            if (peer.evaluation_due()) {
                CHECK(peer.evaluation_due());  // still due until recorded: the same tick
                peer.record_evaluation(0.1 + 0.01 * step, 2.0 - 0.01 * step);
            }
            ++step;
        } while (peer.step(1.0));
        me.metrics = peer.finish();
        CHECK_FALSE(peer.evaluation_due());  // after finish()
    });
    for (int r = 0; r < n; ++r) {
        CAPTURE(r);
        REQUIRE(out[static_cast<std::size_t>(r)].error == "");
        std::ifstream in(metrics(r));
        std::string line;
        std::vector<std::int64_t> ticks;
        while (std::getline(in, line)) {
            const auto j = Json::parse(line);
            if (!j.contains("eval")) continue;
            CHECK(j["rank"] == r);
            const auto k = j["eval"].get<std::int64_t>();
            CHECK(j["time"].get<double>() == doctest::Approx(0.02 * static_cast<double>(k)));
            CHECK(j["at"].get<double>() >= j["time"].get<double>());
            CHECK(j["accuracy"].get<double>() >= 0.1);
            ticks.push_back(k);
        }
        // 40 steps of at least 2 ms: at least 80 ms, so ticks 0 and at least 3 more, each once.
        REQUIRE(ticks.size() >= 4);
        CHECK(ticks.front() == 0);
        for (std::size_t i = 1; i < ticks.size(); ++i) CHECK(ticks[i] > ticks[i - 1]);
    }
}

TEST_CASE("a negative eval interval is one ConfigError line naming the field") {
    test::TempDir dir;
    const auto path = topology_file(dir, "ring", 2, topology::WeightRule::uniform);
    std::vector<float> p(4, 0.0f);
    auto o = inproc_options(path, 0, "dpsgd", 5, make_inproc_job(2));
    o.eval_interval = -1;
    CHECK_THROWS_WITH_AS(Peer(o, p), doctest::Contains("PeerOptions::eval_interval: -1 s"),
                         ConfigError);
}

TEST_CASE("a peer with a trace path writes its timeline adding up to its busy and idle times") {
    test::TempDir dir;
    const int n = 2;
    const auto path = topology_file(dir, "ring", n, topology::WeightRule::uniform);
    auto job = make_inproc_job(n);
    const auto file = [&](int r, const char* ext) {
        return (dir.path() / ("peer" + std::to_string(r) + ext)).string();
    };
    auto out = run_loops(n, [&](int r, LoopOutcome& me) {
        auto o = inproc_options(path, r, "dpsgd", 20, job);
        o.metrics_path = file(r, ".jsonl");
        o.trace_path = file(r, ".trace.json");
        std::vector<float> p(6, 1.0f);
        Peer peer(o, p);
        do {
            std::this_thread::sleep_for(std::chrono::milliseconds(r == 0 ? 4 : 1));
            p[0] -= 0.01f;
        } while (peer.step(1.0));
        me.metrics = peer.finish();
    });
    for (int r = 0; r < n; ++r) {
        CAPTURE(r);
        REQUIRE(out[static_cast<std::size_t>(r)].error == "");
        Json summary;
        std::ifstream in(file(r, ".jsonl"));
        for (std::string line; std::getline(in, line);) {
            const auto j = Json::parse(line);
            if (j.contains("summary")) summary = j;
            if (j.contains("step")) CHECK(j.contains("waited_for"));
        }
        REQUIRE(summary.is_object());
        std::ifstream tf(file(r, ".trace.json"));
        const auto doc = Json::parse(tf);
        double busy = 0, idle = 0;
        int steps = 0;
        for (const auto& e : doc["traceEvents"]) {
            CHECK(e["pid"] == r);  // one track: this peer's
            if (e.value("cat", "") == "step") busy += e["dur"].get<double>() / 1e6, ++steps;
            if (e.value("cat", "") == "wait") idle += e["dur"].get<double>() / 1e6;
        }
        CHECK(steps == summary["steps"].get<int>());
        CHECK(busy == doctest::Approx(summary["busy"].get<double>()).epsilon(0.01));
        CHECK(idle == doctest::Approx(summary["idle"].get<double>()).epsilon(0.01));
        CHECK(doc["otherData"]["clock"] == "steady");
    }
}
