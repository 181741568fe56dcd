// Timelines (docs/formats/trace.md): the recorder's file, its size bound and sampling, merging, and
// the simulator's trace against its own busy and idle times.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "gossamer/core/cluster.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/core/trace.hpp"
#include "gossamer/sim/simulation.hpp"
#include "gossamer/topology/schedule.hpp"
#include "support/temp_dir.hpp"

using namespace gossamer;
using gossamer::test::TempDir;
using Json = nlohmann::json;

namespace {

Json load(const std::string& path) {
    std::ifstream in(path);
    return Json::parse(in);
}

std::set<int> peer_tracks(const Json& doc) {
    std::set<int> pids;
    for (const auto& e : doc["traceEvents"])
        if (e.value("name", "") == "process_name" && e["pid"].get<int>() != trace::kJobTrack)
            pids.insert(e["pid"].get<int>());
    return pids;
}

// Cost-mode simulation of 6 peers on a ring (push-sum weights for sgp), peer 0 three times
// slower, peer 5 failing at `fail_at` (never when < 0).
sim::SimResult simulate(const std::string& algo, trace::Recorder* rec, double fail_at = -1) {
    topology::FamilySpec fam;
    fam.family = algo == "sgp" ? "one_peer_exponential" : "ring";
    fam.n = algo == "sgp" ? 8 : 6;
    fam.weights = algo == "sgp" ? topology::WeightRule::push_sum : topology::WeightRule::uniform;
    std::string peers = R"({"rank": 0, "factor": 3})";
    if (fail_at >= 0) peers += fmt::format(R"(, {{"rank": 5, "fail_at": {}}})", fail_at);
    static Cluster cluster;
    cluster = parse_cluster(json::parse_text(R"({"version": 1, "defaults": {"base_time": 0.01,
        "jitter": {"distribution": "uniform", "width": 0.2}},
        "peers": [)" + peers + R"(], "network": {"latency": 1e-4, "bandwidth": 1e8}})",
                                             "cluster.json"),
                            fam.n);
    sim::SimSetup s;
    s.algorithm = algo;
    s.topology = topology::generate(fam);
    s.cluster = &cluster;
    s.mode = sim::Mode::cost;
    s.model_size = 10000;
    s.steps = 40;
    s.failure_detection = 0.05;
    s.trace = rec;
    return sim::simulate(s);
}

}  // namespace

TEST_CASE("a recorder writes Chrome-trace JSON with one track per peer and named waits") {
    TempDir dir;
    trace::Recorder rec("virtual", 1'000'000);
    rec.set_kind_names({"k0", "full_model"});
    rec.wait(0, 0.0, 0.5, {trace::WaitCause::start});
    rec.step(0, 0.5, 1.5, 0, 2.5);
    rec.send(0, 1.5, 1, 4096, 3, 1);
    rec.receive(1, 1.6, 0, 4096, 3, 1);
    rec.wait(1, 0.0, 1.6, {trace::WaitCause::message, 0, 3});
    rec.step(1, 1.6, 2.0, 0, 2.0);
    rec.peer_failed(1, 2.1, 0);
    rec.failure(0, 2.0);
    rec.evaluation(trace::kJobTrack, 2.0, 2.0, 0.75, 0.5);
    const auto path = (dir.path() / "t.json").string();
    rec.write(path);
    const Json doc = load(path);
    CHECK(peer_tracks(doc) == std::set<int>{0, 1});
    bool named_wait = false, send_bytes = false, job = false;
    for (const auto& e : doc["traceEvents"]) {
        if (e.value("name", "") == "wait for peer 0") {
            named_wait = true;
            CHECK(e["args"]["round"] == 3);
            CHECK(e["dur"].get<double>() == doctest::Approx(1.6e6));
        }
        if (e.value("cat", "") == "send") {
            send_bytes = e["args"]["bytes"] == 4096 && e["args"]["to"] == 1;
            CHECK(e["args"]["kind"] == "full_model");
        }
        job = job || (e["pid"] == trace::kJobTrack && e.value("cat", "") == "evaluation");
    }
    CHECK(named_wait);
    CHECK(send_bytes);
    CHECK(job);
    CHECK(doc["otherData"]["sampling"]["every"] == 1);
    const auto totals = trace::read_totals(path);
    REQUIRE(totals.size() == 2);
    CHECK(totals[0].second.busy == doctest::Approx(1.0));
    CHECK(totals[0].second.idle == doctest::Approx(0.5));
    CHECK(totals[1].second.idle == doctest::Approx(1.6));
}

TEST_CASE("past its bound a recorder keeps whole steps, says so, and the file stays bounded") {
    TempDir dir;
    const std::size_t limit = 64 * 1024;
    trace::Recorder rec("virtual", limit);
    const int steps = 2000;
    for (int k = 0; k < steps; ++k)
        for (int p = 0; p < 3; ++p) {
            const double t = k;
            rec.wait(p, t, t + 0.25, {trace::WaitCause::message, (p + 1) % 3, k});
            rec.receive(p, t + 0.25, (p + 1) % 3, 1000, k, 2);
            rec.step(p, t + 0.25, t + 1, k, 1.0);
            rec.send(p, t + 1, (p + 2) % 3, 1000, k, 2);
        }
    CHECK(rec.every() > 1);
    CHECK(rec.events() <= rec.max_events());
    const auto path = (dir.path() / "t.json").string();
    rec.write(path);
    CHECK(std::filesystem::file_size(path) <= limit + 3 * 400 + 2000);
    const Json doc = load(path);
    const auto every = doc["otherData"]["sampling"]["every"].get<std::int64_t>();
    CHECK(every == rec.every());
    // Whole steps: every kept step has its wait, and the sums scale back exactly.
    for (const auto& [pid, t] : trace::read_totals(path)) {
        CHECK(t.steps == t.waits);
        CHECK(t.steps == (steps + every - 1) / every);
        CHECK(t.busy == doctest::Approx(0.75 * static_cast<double>(t.steps)));
        CHECK(t.idle == doctest::Approx(0.25 * static_cast<double>(t.steps)));
    }
    for (const auto& e : doc["traceEvents"])
        if (e.value("cat", "") == "step") CHECK(e["args"]["step"].get<std::int64_t>() % every == 0);
}

TEST_CASE("merged peer files keep one track per peer, shifted by their clock origins") {
    TempDir dir;
    std::vector<std::string> files;
    for (int r = 0; r < 3; ++r) {
        trace::Recorder rec("steady", 1'000'000, 1e12 + r * 1e6);  // starts 1 s apart
        rec.step(r, 0.0, 1.0, 0, 1.0);
        files.push_back((dir.path() / fmt::format("p{}.json", r)).string());
        rec.write(files.back());
    }
    const auto out = (dir.path() / "job.json").string();
    trace::merge_files(files, out);
    const Json doc = load(out);
    CHECK(peer_tracks(doc) == std::set<int>{0, 1, 2});
    for (const auto& e : doc["traceEvents"])
        if (e.value("cat", "") == "step")
            CHECK(e["ts"].get<double>() == doctest::Approx(e["pid"].get<double>() * 1e6));
    CHECK_THROWS_AS(trace::merge_files({(dir.path() / "missing.json").string()}, out), ConfigError);
    CHECK_THROWS_AS(trace::check_writable(dir.path().string(), "--trace"), ConfigError);
}

TEST_CASE("merged files are aligned to rank 0's clock by their bootstrap offsets") {
    // Three hosts: host 1's clock is 5 s ahead of rank 0's, host 2's 3 s behind; each peer
    // started at the same true moment and stepped for 1 s. Their offsets (rank 0's clock minus
    // theirs) undo the skews, and the merged file states the largest residual.
    TempDir dir;
    const double skew[] = {0, 5e6, -3e6}, residual[] = {0, 250, 400};
    std::vector<std::string> files;
    for (int r = 0; r < 3; ++r) {
        trace::Recorder rec("steady", 1'000'000, 1e12 + skew[r]);
        rec.set_info("clock_offset", {{"offset_us", -skew[r]},
                                      {"residual_us", residual[r]},
                                      {"round_trips", r == 0 ? 0 : 8}});
        rec.step(r, 0.0, 1.0, 0, 1.0);
        files.push_back((dir.path() / fmt::format("p{}.json", r)).string());
        rec.write(files.back());
    }
    const auto out = (dir.path() / "job.json").string();
    trace::merge_files(files, out);
    Json doc = load(out);
    for (const auto& e : doc["traceEvents"])
        if (e.value("cat", "") == "step") CHECK(e["ts"].get<double>() == doctest::Approx(0));
    CHECK(doc["otherData"]["clock"] ==
          "steady, aligned to rank 0's system clock by offsets estimated at the bootstrap");
    CHECK(doc["otherData"]["clock_residual_us"].get<double>() == 400);
    CHECK(doc["otherData"]["origin_unix_us"].get<double>() == doctest::Approx(1e12));
    // A file without an offset (an older peer) is aligned by its host's clock, and the file
    // says which were which.
    trace::Recorder plain("steady", 1'000'000, 1e12 + 2e6);
    plain.step(3, 0.0, 1.0, 0, 1.0);
    files.push_back((dir.path() / "p3.json").string());
    plain.write(files.back());
    trace::merge_files(files, out);
    doc = load(out);
    CHECK(doc["otherData"]["clock"].get<std::string>().find("3 of 4 files aligned") !=
          std::string::npos);
    for (const auto& e : doc["traceEvents"])
        if (e.value("cat", "") == "step")
            CHECK(e["ts"].get<double>() == doctest::Approx(e["pid"] == 3 ? 2e6 : 0));
}

TEST_CASE("the simulator's steps and waits add up to its busy and idle times within 1%") {
    TempDir dir;
    for (const std::string algo : {"allreduce", "dpsgd", "sgp", "async"}) {
        for (double fail_at : {-1.0, 0.2}) {
            CAPTURE(algo);
            CAPTURE(fail_at);
            if (fail_at >= 0 && algo == "allreduce") continue;  // it stops
            trace::Recorder rec("virtual", 64'000'000);
            const auto r = simulate(algo, &rec, fail_at);
            REQUIRE(rec.every() == 1);
            const auto path = (dir.path() / fmt::format("{}.json", algo)).string();
            rec.write(path);
            const auto totals = trace::read_totals(path);
            REQUIRE(totals.size() == r.peers.size());
            for (const auto& [pid, t] : totals) {
                CAPTURE(pid);
                const auto& ps = r.peers[static_cast<std::size_t>(pid)];
                CHECK(std::abs(t.busy - ps.busy) <= 0.01 * ps.busy);
                CHECK(std::abs(t.idle - ps.idle) <= 0.01 * std::max(ps.idle, 1e-3));
                CHECK(t.bytes_sent == ps.bytes_sent);
                if (!ps.failed) CHECK(t.steps == ps.steps);
            }
            // The straggler's neighbours wait for it by name (async never waits).
            if (algo == "async") continue;
            bool named = false;
            const Json doc = load(path);
            for (const auto& e : doc["traceEvents"])
                named = named || e.value("name", "") == "wait for peer 0";
            CHECK(named);
        }
    }
}
