// The chaos run (docs/operations/reliability.md, "Chaos run"): scripts/chaos.sh's bad input, and
// its short CI version: 2 minutes of jobs of real peers in the lab under async, dpsgd and allreduce
// while a seeded schedule kills, pauses, cuts and throttles them, every invariant checked per job.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "lab_support.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

using namespace gossamer::test;
using Json = nlohmann::json;

namespace {

const std::string kChaos = std::string(GOSSAMER_SOURCE_DIR) + "/scripts/chaos.sh";
const std::string kGossamer = GOSSAMER_BINARY;

int lines(const std::string& s) {
    int n = 0;
    for (char c : s) n += c == '\n';
    return n;
}

}  // namespace

TEST_SUITE("lab") {
    TEST_CASE("chaos: scripts/chaos.sh refuses bad input in one line, exit 2") {
        auto r = run("env PATH=/nonexistent /bin/bash " + kChaos + " --seed 1");
        INFO(r.err);
        CHECK(r.status == 2);
        CHECK(lines(r.err) == 1);
        CHECK(r.err.find("run it as root after scripts/deps.sh --lab") != std::string::npos);
        if (!have_netns()) return;  // the rest gets past the root and iproute2 check
        TempDir dir;
        const std::string with = "GOSSAMER=" + kGossamer + " " + kChaos;
        std::filesystem::create_directory(dir.path() / "mine");
        const std::string keep = dir.write("mine/notes.txt", "a user's file\n");
        for (const auto& [args, says] : std::vector<std::pair<std::string, std::string>>{
                 {"--minutes 0", "--minutes 0.0: must be in (0, 1440]"},
                 {"--peers 2", "--peers 2: must be 3..16"},
                 {"--job-seconds 1", "--job-seconds 1.0: must be 5..600"},
                 {"--algorithms async,bogus", "unknown 'bogus'"},
                 {"--out " + (dir.path() / "mine").string(), "was not written by a chaos run"}}) {
            CAPTURE(args);
            r = run(with + " " + args);
            INFO(r.err);
            CHECK(r.status == 2);
            CHECK(lines(r.err) == 1);
            CHECK(r.err.find(says) != std::string::npos);
        }
        CHECK(std::ifstream(keep).good());  // nothing of the user's was removed
        r = run("GOSSAMER=/nonexistent/gossamer " + kChaos + " --seed 1");
        CHECK(r.status == 2);
        CHECK(r.err.find("not an executable") != std::string::npos);
    }

    TEST_CASE("chaos: 2 minutes of faults under async, dpsgd and allreduce keep every invariant") {
        if (!have_netns()) return;
        TempDir dir;
        const auto out = dir.path() / "chaos";
        const auto r = run("GOSSAMER=" + kGossamer + " " + kChaos + " --seed 1 --minutes 2 --out " +
                           out.string());
        INFO(r.out);
        INFO(r.err);
        CHECK(r.status == 0);
        std::ifstream in(out / "chaos.json");
        const Json report = Json::parse(in, nullptr, false);
        REQUIRE(report.is_object());
        CHECK(report["violations"] == 0);
        std::set<std::string> algorithms;
        int faults = 0, kills = 0;
        for (const auto& job : report["jobs"]) {
            algorithms.insert(job["algorithm"].get<std::string>());
            faults += static_cast<int>(job["faults"].size());
            for (const auto& f : job["faults"]) kills += f["kind"] == "kill";
            CHECK(job["violations"].empty());
        }
        MESSAGE(report["jobs"].size() << " jobs, " << faults << " faults (" << kills << " kills)");
        CHECK(algorithms == std::set<std::string>{"async", "dpsgd", "allreduce"});
        CHECK(faults >= 6);
    }
}
