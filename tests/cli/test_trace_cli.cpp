// --trace as a user runs it (docs/formats/trace.md): gossamer sim and gossamer launch (peers as
// threads) write Chrome-trace JSON with one track per peer whose step and wait durations add up to
// the metrics' busy and idle times; bad values are refused with one line and exit 2.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "launch_job.hpp"

using gossamer::test::kBin;
using gossamer::test::LaunchJob;
using gossamer::test::run;
using Json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string kStraggler = R"({"version": 1, "defaults": {"base_time": 0.005},
    "peers": [{"rank": 0, "factor": 3}], "network": {"latency": 1e-4, "bandwidth": 1e8}})";

Json load(const fs::path& p) {
    std::ifstream in(p);
    REQUIRE(in);
    return Json::parse(in);  // throws (fails the test) when it is not JSON
}

struct Totals {
    double busy = 0, idle = 0;
};

// Per peer track: seconds of steps and waits; the set of peer tracks named.
std::map<int, Totals> totals(const Json& doc, std::set<int>* tracks = nullptr) {
    std::map<int, Totals> t;
    for (const auto& e : doc.at("traceEvents")) {
        const int pid = e.at("pid").get<int>();
        if (e.value("name", "") == "process_name" && e["args"]["name"] != "job" && tracks)
            tracks->insert(pid);
        const std::string cat = e.value("cat", "");
        if (cat == "step") t[pid].busy += e.at("dur").get<double>() / 1e6;
        if (cat == "wait") t[pid].idle += e.at("dur").get<double>() / 1e6;
    }
    return t;
}

bool within(double traced, double metric) {
    return std::abs(traced - metric) <= 0.01 * std::max(metric, 1e-3);
}

}  // namespace

TEST_CASE("sim --trace writes one track per peer adding up to peers.jsonl's busy and idle") {
    LaunchJob job;
    const auto cluster = job.dir.write("straggler.json", kStraggler);
    const auto out = job.dir.path() / "sim";
    const auto file = job.dir.path() / "t" / "sim.json";
    const auto r =
        run(kBin + " sim --topology " + job.topology + " --config " + job.config + " --cluster " +
            cluster + " --algorithms dpsgd --out " + out.string() + " --trace " + file.string());
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    const Json doc = load(file);
    std::set<int> tracks;
    const auto t = totals(doc, &tracks);
    CHECK(tracks == std::set<int>{0, 1, 2, 3});
    CHECK(doc["otherData"]["clock"] == "virtual");
    CHECK(doc["otherData"]["sampling"]["every"] == 1);
    std::ifstream peers(out / "dpsgd" / "seed0" / "peers.jsonl");
    int seen = 0;
    for (std::string line; std::getline(peers, line); ++seen) {
        const auto p = Json::parse(line);
        const int rank = p["rank"].get<int>();
        CAPTURE(rank);
        CHECK(within(t.at(rank).busy, p["busy"].get<double>()));
        CHECK(within(t.at(rank).idle, p["idle"].get<double>()));
    }
    CHECK(seen == 4);
    bool evaluation = false;
    for (const auto& e : doc["traceEvents"])
        evaluation = evaluation || e.value("cat", "") == "evaluation";
    CHECK(evaluation);
}

TEST_CASE("sim --trace with several algorithms writes one file per run") {
    LaunchJob job;
    const auto file = job.dir.path() / "t.json";
    const auto r = run(kBin + " sim --topology " + job.topology + " --config " + job.config +
                       " --cluster " + job.cluster + " --algorithms allreduce,sgp --seeds 2 " +
                       "--out " + (job.dir.path() / "o").string() + " --trace " + file.string());
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    for (const char* tag : {"allreduce-seed0", "allreduce-seed1", "sgp-seed0", "sgp-seed1"})
        CHECK(fs::exists(job.dir.path() / (std::string("t-") + tag + ".json")));
    CHECK(!fs::exists(file));
}

TEST_CASE("a small --trace-limit samples whole steps and says so") {
    LaunchJob job;
    const auto file = job.dir.path() / "t.json";
    const auto r =
        run(kBin + " sim --mode cost --steps 400 --topology " + job.topology + " --cluster " +
            job.cluster + " --algorithms dpsgd --out " + (job.dir.path() / "o").string() +
            " --trace " + file.string() + " --trace-limit 0.05");
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    CHECK(fs::file_size(file) <= 50'000 + 4 * 400 + 2'000);
    const Json doc = load(file);
    CHECK(doc["otherData"]["sampling"]["every"].get<int>() > 1);
    CHECK(doc["otherData"]["sampling"]["rule"].get<std::string>().find("whole steps") !=
          std::string::npos);
}

TEST_CASE("bad --trace and --trace-limit values are refused with one line and exit 2") {
    LaunchJob job;
    const std::string base = kBin + " sim --topology " + job.topology + " --config " + job.config +
                             " --cluster " + job.cluster + " --algorithms dpsgd " + "--out " +
                             (job.dir.path() / "o").string();
    auto r = run(base + " --trace " + job.dir.path().string());
    CHECK(r.status == 2);
    CHECK(r.err.find("--trace") != std::string::npos);
    CHECK(r.err.find("folder") != std::string::npos);
    CHECK(!fs::exists(job.dir.path() / "o"));  // nothing ran
    r = run(base + " --trace " + (job.dir.path() / "t.json").string() + " --trace-limit 0");
    CHECK(r.status == 2);
    CHECK(r.err.find("--trace-limit") != std::string::npos);
    r = run(base + " --trace /proc/no/such/t.json");
    CHECK(r.status == 2);
    CHECK(r.err.find("--trace") != std::string::npos);
    r = run(kBin + " launch --inproc --no-plots --topology " + job.topology + " --config " +
            job.config + " --trace " + job.dir.path().string());
    CHECK(r.status == 2);
    CHECK(r.err.find("--trace") != std::string::npos);
    // A peer refuses it before it joins (the others would wait for it in vain).
    r = run(kBin + " peer --topology " + job.topology + " --config " + job.config +
            " --rank 0 --join-timeout 5 --out " + (job.dir.path() / "p").string() + " --trace " +
            job.dir.path().string());
    CHECK(r.status == 2);
    const bool ucx = r.err.find("no UCX backend") == std::string::npos;  // -DGOSSAMER_USE_UCX=OFF
    if (ucx) CHECK(r.err.find("--trace") != std::string::npos);
}

TEST_CASE("launch --inproc --trace merges the peers' timelines into one file") {
    LaunchJob job;
    const auto cluster = job.dir.write("straggler.json", kStraggler);
    const auto out = job.dir.path() / "launch";
    const auto file = out / "trace.json";
    const auto r =
        run(kBin + " launch --inproc --no-plots --topology " + job.topology + " --config " +
            job.config + " --cluster " + cluster + " --algorithms dpsgd --timeout 60 --out " +
            out.string() + " --trace " + file.string());
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    const Json doc = load(file);
    std::set<int> tracks;
    const auto t = totals(doc, &tracks);
    CHECK(tracks == std::set<int>{0, 1, 2, 3});
    CHECK(doc["otherData"]["files"].size() == 4);
    // Threads of one process read one clock: offsets and residual 0.
    CHECK(doc["otherData"]["clock_residual_us"].get<double>() == 0);
    for (const auto& f : doc["otherData"]["files"])
        CHECK(f["otherData"]["clock_offset"]["offset_us"].get<double>() == 0);
    for (int rank = 0; rank < 4; ++rank) {
        CAPTURE(rank);
        Json summary;
        std::ifstream in(out / "dpsgd" / ("peer" + std::to_string(rank) + ".jsonl"));
        for (std::string line; std::getline(in, line);)
            if (line.find("\"summary\"") != std::string::npos) summary = Json::parse(line);
        REQUIRE(summary.is_object());
        CHECK(within(t.at(rank).busy, summary["busy"].get<double>()));
        CHECK(within(t.at(rank).idle, summary["idle"].get<double>()));
    }
    // The straggler's neighbours wait for it by name.
    int named = 0;
    for (const auto& e : doc["traceEvents"])
        if (e.value("name", "") == "wait for peer 0") ++named;
    CHECK(named > 0);
}
