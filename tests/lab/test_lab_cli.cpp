// gossamer lab check|up|down|clean from the command line: the check's output, the cluster file
// driving the caps, and one line with exit 2 for every bad input.
#include <doctest/doctest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <string>

#include "lab_support.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

namespace lab = gossamer::lab;
using namespace gossamer::test;

namespace {

const std::string kGossamer = GOSSAMER_BINARY;

int lines(const std::string& s) {
    int n = 0;
    for (char c : s) n += c == '\n';
    return n;
}

// Exit 2 and exactly one line on stderr that contains `part`.
void refused(const std::string& args, const std::string& part) {
    const auto r = run(kGossamer + " " + args);
    INFO("gossamer " << args << " -> " << r.status << ": " << r.err);
    CHECK(r.status == 2);
    CHECK(lines(r.err) == 1);
    CHECK(r.err.find(part) != std::string::npos);
}

const char* kCluster = R"({
  "n": 3,
  "defaults": {"base_time": 0.01, "uplink": 2.5e7, "downlink": 2.5e7},
  "peers": [{"rank": 1, "uplink": 1.25e7}],
  "network": {"latency": 0.002, "bandwidth": 1.25e9,
              "links": [{"from": 0, "to": 2, "bandwidth": 5e6}]}
})";

// `gossamer lab check ARGS` run until its verdict says the veths carry the caps, at most three
// times; returns the run that carried, or the last. A cap must hold in every run (no peer above
// 110%); reaching 90% of it needs the senders to get the CPU, which a loaded 2-core machine
// (ctest -j2 beside another test) may deny for a window: a clean-clone CI run once measured 169
// of 200 Mbit/s. A shaper that is too tight misses in all three (as check_near_cap in
// test_lab_shaping.cpp).
RunResult check_until_carries(const std::string& args, bool json) {
    RunResult r;
    for (int attempt = 0; attempt < 3; ++attempt) {
        r = run(kGossamer + " lab check " + args + (json ? " --json" : ""));
        INFO("run " << attempt + 1 << ": " << r.out << r.err);
        REQUIRE(r.status == 0);
        bool carries = false;
        if (json) {
            const auto doc = nlohmann::json::parse(r.out);
            for (const auto& p : doc["peers"])
                CHECK(p["reached_bits_per_s"].get<double>() <=
                      1.1 * p["cap_bits_per_s"].get<double>());
            carries = doc["carries"] == true;
        } else {
            carries = r.out.find("verdict: the veths carry these caps here") != std::string::npos;
        }
        if (carries) return r;
        MESSAGE("lab check " << args << ": below 90% of a cap in run " << attempt + 1);
    }
    return r;
}

}  // namespace

TEST_SUITE("lab") {
    TEST_CASE("lab check: the rate every peer reaches at once against its cap, and a verdict") {
        if (!have_netns()) return;
        const auto r = check_until_carries("--peers 2 --rate 50mbit --seconds 2.5", false);
        INFO(r.out << r.err);
        CHECK(r.out.find("lab check: 2 peers (every peer capped at 50 Mbit/s)") !=
              std::string::npos);
        CHECK(r.out.find("   0            50.0") != std::string::npos);
        CHECK(r.out.find("   1            50.0") != std::string::npos);
        CHECK(r.out.find("the qdiscs' counters") != std::string::npos);
        CHECK(r.out.find("verdict: the veths carry these caps here") != std::string::npos);

        const auto j = check_until_carries("--peers 2 --rate 50mbit --seconds 2.5", true);
        const auto doc = nlohmann::json::parse(j.out);
        CHECK(doc["carries"] == true);
        REQUIRE(doc["peers"].size() == 2);
        for (const auto& p : doc["peers"]) {
            CHECK(p["cap_bits_per_s"].get<double>() == 50e6);
            CHECK(p["reached_bits_per_s"].get<double>() >= 0.9 * 50e6);
            CHECK(p["reached_bits_per_s"].get<double>() <= 1.1 * 50e6);
        }
    }

    TEST_CASE(
        "lab up: a cluster file's network section becomes the caps, latency stays the "
        "peers'") {
        if (!have_netns()) return;
        TempDir dir;
        const auto file = dir.write("c.json", kCluster);
        const auto r = run(kGossamer + " lab up --cluster " + file + " --for 0.2");
        INFO(r.out << r.err);
        REQUIRE(r.status == 0);
        // bytes/s in the file, bits/s in the lab: 2.5e7 B/s = 200 Mbit/s
        CHECK(r.out.find("200 Mbit/s     200 Mbit/s") != std::string::npos);
        CHECK(r.out.find("100 Mbit/s     200 Mbit/s") != std::string::npos);  // peer 1's uplink
        CHECK(r.out.find("link 0 -> 2: 40 Mbit/s") != std::string::npos);
        CHECK(r.out.find("the peers emulate the cluster file's latencies") != std::string::npos);
        CHECK(r.out.find("removed") != std::string::npos);
    }

    TEST_CASE("lab check --cluster: each flow against its bottleneck (uplink, next downlink)") {
        if (!have_netns()) return;
        TempDir dir;
        const auto file = dir.write("c.json", kCluster);
        const auto r = check_until_carries("--cluster " + file + " --seconds 2", true);
        INFO(r.out << r.err);
        const auto doc = nlohmann::json::parse(r.out);
        REQUIRE(doc["peers"].size() == 3);
        // 0 -> 1 and 2 -> 0 at 200 Mbit/s; 1 -> 2 behind peer 1's 100 Mbit/s uplink
        CHECK(doc["peers"][0]["cap_bits_per_s"].get<double>() == 200e6);
        CHECK(doc["peers"][1]["cap_bits_per_s"].get<double>() == 100e6);
        CHECK(doc["peers"][2]["cap_bits_per_s"].get<double>() == 200e6);
        for (const auto& p : doc["peers"]) {
            const double cap = p["cap_bits_per_s"].get<double>();
            CHECK(p["reached_bits_per_s"].get<double>() <= 1.1 * cap);
            CHECK(p["reached_bits_per_s"].get<double>() >= 0.9 * cap);
        }
        CHECK(doc["carries"] == true);
    }

    TEST_CASE("lab: bad flags and files are one line and exit 2") {
        TempDir dir;
        const auto no_n = dir.write("no_n.json", R"({"defaults": {"base_time": 0.1},
            "network": {"latency": 0, "bandwidth": 1e6}})");
        const auto bad = dir.write("bad.json", R"({"n": 2, "defaults": {"base_time": 0.1},
            "network": {"latency": 0, "bandwidth": -5}})");
        refused("lab check --rate fast", "--rate: \"fast\" is not a rate");
        refused("lab check --rate 1gbit --cluster x.json", "give one");
        refused("lab check --peers 1", "at least 2 peers");
        refused("lab check --peers 251", "--peers");
        refused("lab check --seconds 0", "--seconds");
        refused("lab up --cluster " + dir.path().string() + "/missing.json", "missing.json");
        refused("lab up --cluster " + no_n, "give --peers N");
        refused("lab up --cluster " + bad, "network.bandwidth");
        const auto racks = dir.write("racks.json", R"({"n": 2, "defaults": {"base_time": 0.1},
            "network": {"latency": 0, "bandwidth": 1e6,
                        "racks": [{"rank": 0, "uplink": 1e5}]}})");
        refused("lab up --cluster " + racks, "network.racks: the lab does not model racks");
        refused("lab up --for -1", "--for");
        refused("lab down nonsense", "\"nonsense\" is not a lab job");
        refused("lab frob", "unknown command 'frob'");
        refused("lab check --bogus", "--bogus");
    }

    TEST_CASE("lab: without root, one line naming what is missing and exit 2") {
        std::string prefix;
        if (::geteuid() == 0) {
            if (!missing_program("setpriv", "util-linux").empty()) {
                MESSAGE("setpriv is missing: the non-root run is not tried");
                return;
            }
            prefix = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
        }
        for (const char* cmd : {"lab clean", "lab check --peers 2", "lab down gsm3"}) {
            const auto r = run(prefix + kGossamer + " " + cmd);
            INFO(cmd << " -> " << r.err);
            CHECK(r.status == 2);
            CHECK(lines(r.err) == 1);
            CHECK(r.err.find("needs root") != std::string::npos);
        }
    }
    TEST_CASE(
        "lab: scripts/lab/demo.sh refuses in one line, exit 2, without ip and tc or a binary") {
        const std::string demo = std::string(GOSSAMER_SOURCE_DIR) + "/scripts/lab/demo.sh";
        // No PATH: neither ip nor tc is found (nor root, for a non-root user).
        auto r = run("env PATH=/nonexistent /bin/bash " + demo);
        INFO(r.err);
        CHECK(r.status == 2);
        CHECK(lines(r.err) == 1);
        CHECK(r.err.find("missing: ") != std::string::npos);
        CHECK(r.err.find("ip tc; run it as root after scripts/deps.sh --lab") != std::string::npos);
        CHECK(r.out.empty());
        // GOSSAMER names no program: refused before anything runs (root with ip and tc), or
        // for what is missing.
        r = run("GOSSAMER=/nonexistent/gossamer " + demo);
        INFO(r.err);
        CHECK(r.status == 2);
        CHECK(lines(r.err) == 1);
        if (::geteuid() == 0 &&
            run("command -v ip >/dev/null && command -v tc >/dev/null").status == 0)
            CHECK(r.err.find("GOSSAMER=/nonexistent/gossamer is not an executable") !=
                  std::string::npos);
    }
}
