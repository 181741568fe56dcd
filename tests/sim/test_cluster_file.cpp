#include <doctest/doctest.h>
#include <fmt/format.h>

#include <filesystem>
#include <string>

#include "gossamer/core/cluster.hpp"
#include "gossamer/core/error.hpp"
#include "support/temp_dir.hpp"

using namespace gossamer;
using gossamer::ConfigError;

namespace {

// A valid head: network and defaults; `more` adds keys at the root.
std::string with(const std::string& more) {
    return R"({"network": {"latency": 1e-5, "bandwidth": 1e9}, "defaults": {"base_time": 0.1})" +
           (more.empty() ? std::string() : ", " + more) + "}";
}

// Loads `text` as a cluster file for n peers and returns the ConfigError message with the file
// name replaced by "F", or "" when it loads.
std::string error_of(const std::string& text, int n = 4) {
    gossamer::test::TempDir dir;
    const std::string path = dir.write("c.json", text);
    try {
        load_cluster(path, n);
    } catch (const ConfigError& e) {
        std::string msg = e.what();
        CHECK(msg.find('\n') == std::string::npos);  // one line
        CHECK(!e.fix().empty());                     // every error says how to fix it
        if (msg.rfind(path, 0) == 0) msg = "F" + msg.substr(path.size());
        return msg;
    }
    return "";
}

Cluster parse(const std::string& text, int n) {
    return parse_cluster(gossamer::json::parse_text(text, "c.json"), n);
}

}  // namespace

TEST_CASE("every example cluster loads") {
    const std::filesystem::path dir =
        std::filesystem::path(GOSSAMER_SOURCE_DIR) / "examples/clusters";
    int count = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        if (entry.path().extension() != ".json") continue;
        CAPTURE(entry.path().string());
        // A file without "n" fits any topology; 16 is the size the examples are written for.
        const auto doc = gossamer::json::load_file(entry.path().string());
        const int n = doc.root->contains("n") ? doc.root->at("n").get<int>() : 16;
        Cluster c = parse_cluster(doc, n);
        CHECK(c.n() == n);
        ++count;
    }
    CHECK(count >= 4);
    const std::string root = GOSSAMER_SOURCE_DIR "/examples/clusters/";
    CHECK(load_cluster(root + "straggler16.json", 16).peers[0].factor == 4.0);
    CHECK(load_cluster(root + "straggler16.json", 16).peers[1].factor == 1.0);
    CHECK(load_cluster(root + "jitter16.json", 16).peers[15].jitter.sigma == 0.5);
}

TEST_CASE("defaults only: the cluster fits any n") {
    for (int n : {1, 3, 64}) {
        Cluster c = parse(with(""), n);
        REQUIRE(c.n() == n);
        CHECK(c.peers[n - 1].base_time == 0.1);
        CHECK(c.peers[0].factor == 1.0);
        CHECK(c.peers[0].jitter.kind == JitterKind::constant);
        CHECK(c.peers[0].fail_at == never);
        CHECK(c.peers[0].uplink == 1e9);  // uplink and downlink default to the link bandwidth
        CHECK(c.peers[0].downlink == 1e9);
        CHECK(c.link(0, n - 1).latency == 1e-5);
    }
}

TEST_CASE("overrides by rank, list and range, links directed and undirected") {
    Cluster c = parse(with(R"("peers": [
        {"rank": 0, "factor": 4, "fail_at": 30},
        {"ranks": [1, 3], "jitter": {"distribution": "uniform", "width": 0.25}},
        {"range": [2, 3], "uplink": 1e8, "slow": [{"from": 5, "to": 6, "factor": 2},
                                                 {"from": 1, "to": 2, "factor": 3}]},
        {"rank": 3, "factor": 0.5}])"),
                      5);
    CHECK(c.peers[0].factor == 4.0);
    CHECK(c.peers[0].fail_at == 30.0);
    CHECK(c.peers[1].jitter.kind == JitterKind::uniform);
    CHECK(c.peers[1].jitter.width == 0.25);
    CHECK(c.peers[2].jitter.kind == JitterKind::constant);
    CHECK(c.peers[3].jitter.kind == JitterKind::uniform);
    CHECK(c.peers[3].factor == 0.5);  // another field of rank 3 in another entry is fine
    CHECK(c.peers[3].uplink == 1e8);
    CHECK(c.peers[3].downlink == 1e9);
    REQUIRE(c.peers[2].slow.size() == 2);
    CHECK(c.peers[2].slow[0].from == 1.0);  // sorted by start
    CHECK(c.peers[2].slow[1].factor == 2.0);
    CHECK(c.peers[4].slow.empty());
    CHECK(c.peers[4].uplink == 1e9);

    Cluster l = parse(R"({"network": {"latency": 1e-5, "bandwidth": 1e9, "links": [
        {"from": 0, "to": 1, "latency": 0.5},
        {"between": [1, 2], "bandwidth": 1e6},
        {"from": 2, "to": 1, "latency": 0.25}]},
        "defaults": {"base_time": 0.1, "slow": [{"from": 10, "factor": 2}]}})",
                      3);
    CHECK(l.link(0, 1).latency == 0.5);
    CHECK(l.link(0, 1).bandwidth == 1e9);
    CHECK(l.link(1, 0).latency == 1e-5);  // directed: the reverse keeps the default
    CHECK(l.link(1, 2).bandwidth == 1e6);
    CHECK(l.link(2, 1).bandwidth == 1e6);
    CHECK(l.link(2, 1).latency == 0.25);
    CHECK(l.link(1, 2).latency == 1e-5);
    CHECK(l.link(2, 0).latency == 1e-5);
    REQUIRE(l.peers[2].slow.size() == 1);   // slow periods in defaults apply to every peer
    CHECK(l.peers[2].slow[0].to == never);  // no "to": never ends
}

TEST_CASE("network.failure_detection: how long the others take to hear of a failure") {
    CHECK(parse(with(""), 4).failure_detection == 0.0);
    CHECK(parse(R"({"network": {"latency": 0, "bandwidth": 1e9, "failure_detection": 5},
        "defaults": {"base_time": 0.1}})",
                4)
              .failure_detection == 5.0);
}

TEST_CASE("bad input: invalid JSON, with line and column, a missing file") {
    CHECK(error_of("{\"network\": {\"latency\": 1e-5,\n \"bandwidth\": fast}}").rfind("F:2:", 0) ==
          0);
    CHECK_THROWS_AS(load_cluster("/no/such/cluster.json", 4), ConfigError);
}

TEST_CASE("bad input: unknown keys, with a suggestion") {
    CHECK(
        error_of(with(R"("peer": [])")) ==
        R"(F: peer: unknown key "peer"; did you mean "peers"? allowed keys: version, name, description, n, defaults, peers, network)");
    CHECK(error_of(with(R"("peers": [{"rank": 1, "facter": 2}])"))
              .rfind(R"(F: peers[0].facter: unknown key "facter"; did you mean "factor"?)", 0) ==
          0);
    CHECK(error_of(with(R"("peers": [{"rank": 1, "jitter": {"distribution": "lognormal",
        "sigma": 0.5, "width": 0.1}}])"))
              .rfind(R"(F: peers[0].jitter.width: unknown key "width")", 0) == 0);
}

TEST_CASE("bad input: wrong types") {
    CHECK(
        error_of(R"({"network": {"latency": 1e-5, "bandwidth": "10G"}, "defaults":
        {"base_time": 0.1}})") ==
        R"(F: network.bandwidth: expected a number, found the string "10G"; see docs/formats/cluster-format.md)");
    CHECK(error_of(with(R"("peers": [{"rank": 1.5, "factor": 2}])")) ==
          "F: peers[0].rank: expected an integer, found a number; see "
          "docs/formats/cluster-format.md");
    CHECK(error_of(with(R"("peers": {"rank": 1})")) ==
          "F: peers: expected an array, found an object; see docs/formats/cluster-format.md");
    CHECK(error_of(with(R"("peers": [{"rank": 1, "jitter": "lognormal"}])"))
              .rfind("F: peers[0].jitter: expected an object such as", 0) == 0);
}

TEST_CASE("bad input: zero or negative base time, factor and bandwidths, negative latency") {
    CHECK(error_of(R"({"network": {"latency": 1e-5, "bandwidth": 1e9},
        "defaults": {"base_time": 0}})") ==
          "F: defaults.base_time: base_time must be > 0 seconds, found 0; give the seconds one "
          "local step takes, e.g. 0.05");
    CHECK(error_of(with(R"("peers": [{"rank": 2, "base_time": -0.5}])")) ==
          "F: peers[0].base_time: base_time must be > 0 seconds, found -0.5; give the seconds "
          "one local step takes, e.g. 0.05");
    CHECK(error_of(with(R"("peers": [{"rank": 2, "factor": 0}])"))
              .rfind("F: peers[0].factor: factor must be > 0, found 0;", 0) == 0);
    CHECK(error_of(R"({"network": {"latency": 1e-5, "bandwidth": 0}, "defaults": {"base_time":
        0.1}})") ==
          "F: network.bandwidth: bandwidth must be > 0 bytes/s, found 0; give bytes "
          "per second, e.g. 1.25e9 for 10 Gbit/s");
    CHECK(error_of(with(R"("peers": [{"rank": 0, "uplink": -1}])"))
              .rfind("F: peers[0].uplink: uplink must be > 0 bytes/s, found -1;", 0) == 0);
    CHECK(error_of(with(R"("peers": [{"rank": 0, "downlink": 0}])"))
              .rfind("F: peers[0].downlink: downlink must be > 0 bytes/s", 0) == 0);
    CHECK(error_of(R"({"network": {"latency": -1e-6, "bandwidth": 1e9}, "defaults": {"base_time":
        0.1}})") ==
          "F: network.latency: latency must be >= 0, found -1e-06; give seconds, "
          "e.g. 5e-6");
    CHECK(error_of(R"({"network": {"latency": 0, "bandwidth": 1e9, "links": [{"from": 0, "to": 1,
        "latency": -2}]}, "defaults": {"base_time": 0.1}})")
              .rfind("F: network.links[0].latency: latency must be >= 0, found -2;", 0) == 0);
    CHECK(error_of(R"({"network": {"latency": 0, "bandwidth": 1e9, "links": [{"between": [0, 1],
        "bandwidth": 0}]}, "defaults": {"base_time": 0.1}})")
              .rfind("F: network.links[0].bandwidth: bandwidth must be > 0 bytes/s", 0) == 0);
    CHECK(error_of(with(R"("peers": [{"rank": 3, "fail_at": -1}])"))
              .rfind("F: peers[0].fail_at: fail_at must be >= 0, found -1;", 0) == 0);
    CHECK(error_of(R"({"network": {"latency": 0, "bandwidth": 1e9, "failure_detection": -5},
        "defaults": {"base_time": 0.1}})") ==
          "F: network.failure_detection: failure_detection must be >= 0, found -5; give "
          "seconds, e.g. 5 (the heartbeat timeout)");
}

TEST_CASE("bad input: jitter distribution and parameters") {
    CHECK(
        error_of(with(R"("peers": [{"rank": 0, "jitter": {"distribution": "lognorml",
        "sigma": 0.5}}])")) ==
        R"(F: peers[0].jitter.distribution: unknown value "lognorml"; did you mean "lognormal"? use one of constant, lognormal, uniform)");
    CHECK(error_of(with(R"("peers": [{"rank": 0, "jitter": {"distribution": "lognormal",
        "sigma": -0.1}}])")) ==
          "F: peers[0].jitter.sigma: sigma must be >= 0, found -0.1; use e.g. 0.5; 0 means no "
          "jitter");
    CHECK(error_of(with(R"("peers": [{"rank": 0, "jitter": {"distribution": "lognormal"}}])")) ==
          R"(F: peers[0].jitter: missing key "sigma"; add "sigma")");
    CHECK(error_of(with(R"("peers": [{"rank": 0, "jitter": {"distribution": "uniform",
        "width": 1}}])"))
              .rfind("F: peers[0].jitter.width: width must be in [0, 1), found 1;", 0) == 0);
}

TEST_CASE("bad input: slow periods") {
    auto slow = [](const std::string& period) {
        return error_of(with(R"("peers": [{"rank": 1, "slow": [)" + period + "]}]"));
    };
    CHECK(slow(R"({"from": 5, "to": 5, "factor": 2})") ==
          "F: peers[0].slow[0].to: the slow period ends at 5 but starts at 5; make \"to\" "
          "greater than \"from\", or drop \"to\" for a period that never ends");
    CHECK(slow(R"({"from": 5, "to": 4, "factor": 2})")
              .rfind("F: peers[0].slow[0].to: the slow period ends at 4 but starts at 5", 0) == 0);
    CHECK(slow(R"({"from": 1, "to": 4, "factor": 0.5})") ==
          "F: peers[0].slow[0].factor: slow factor 0.5 is below 1; use a factor >= 1 (2 = half "
          "speed); to make a peer faster, lower its \"factor\"");
    CHECK(slow(R"({"from": -1, "to": 4, "factor": 2})")
              .rfind("F: peers[0].slow[0].from: from must be >= 0, found -1;", 0) == 0);
    CHECK(slow(R"({"from": 1, "to": 4, "factor": 2}, {"from": 3, "factor": 2})") ==
          "F: peers[0].slow[1]: this slow period overlaps the one at peers[0].slow[0]; make the "
          "periods disjoint, or merge them into one");
    CHECK(slow(R"({"from": 1, "to": 4, "factor": 2}, {"from": 4, "to": 5, "factor": 3})") == "");
    CHECK(slow(R"({"to": 4, "factor": 2})") ==
          R"(F: peers[0].slow[0]: missing key "from"; add "from")");
}

TEST_CASE("bad input: ranks out of range for the topology's n") {
    CHECK(error_of(with(R"("peers": [{"rank": 4, "factor": 2}])")) ==
          "F: peers[0].rank: rank 4 is out of range for 4 peers; ranks run from 0 to 3");
    CHECK(error_of(with(R"("peers": [{"rank": 4, "factor": 2}])"), 5) == "");
    CHECK(error_of(with(R"("peers": [{"ranks": [0, -1], "factor": 2}])"))
              .rfind("F: peers[0].ranks[1]: rank -1 is out of range for 4 peers", 0) == 0);
    CHECK(error_of(with(R"("peers": [{"range": [2, 9], "factor": 2}])"))
              .rfind("F: peers[0].range[1]: rank 9 is out of range for 4 peers", 0) == 0);
    CHECK(error_of(R"({"network": {"latency": 0, "bandwidth": 1e9, "links": [{"from": 0, "to": 7,
        "latency": 1}]}, "defaults": {"base_time": 0.1}})") ==
          "F: network.links[0].to: rank 7 is out of range for 4 peers; ranks run from 0 to 3");
    CHECK(
        error_of(with(R"("n": 16)")) ==
        R"(F: n: the cluster is written for 16 peers but the topology has 4; use a topology of 16 peers, or drop "n" if the cluster fits any)");
    CHECK(error_of(with(R"("n": 4)")) == "");
}

TEST_CASE("bad input: duplicate overrides") {
    CHECK(
        error_of(with(R"("peers": [{"range": [0, 2], "factor": 2}, {"rank": 2, "factor": 3}])")) ==
        R"(F: peers[1].factor: rank 2 already has "factor" from peers[0]; set each value of a rank once)");
    CHECK(error_of(with(R"("peers": [{"ranks": [1, 1], "factor": 2}])")) ==
          "F: peers[0].ranks[1]: rank 1 is listed twice; list each rank once");
    CHECK(
        error_of(R"({"network": {"latency": 0, "bandwidth": 1e9, "links": [
        {"between": [0, 1], "latency": 1}, {"from": 1, "to": 0, "latency": 2}]},
        "defaults": {"base_time": 0.1}})") ==
        R"(F: network.links[1].latency: link 1 -> 0 already has "latency" from network.links[0]; set each value of a link once)");
    // A different field of the same link is no duplicate.
    CHECK(error_of(R"({"network": {"latency": 0, "bandwidth": 1e9, "links": [
        {"between": [0, 1], "latency": 1}, {"from": 1, "to": 0, "bandwidth": 2}]},
        "defaults": {"base_time": 0.1}})") == "");
}

TEST_CASE("bad input: selectors, self-links, empty overrides and other inconsistencies") {
    CHECK(
        error_of(with(R"("peers": [{"rank": 0, "ranks": [1], "factor": 2}])")) ==
        R"(F: peers[0]: give exactly one of "rank", "ranks" or "range"; e.g. "rank": 3, "ranks": [0, 5] or "range": [8, 15])");
    CHECK(error_of(with(R"("peers": [{"range": [3, 1], "factor": 2}])")) ==
          "F: peers[0].range: the range [3, 1] is empty; write [first, last] with first <= last");
    CHECK(error_of(with(R"("peers": [{"rank": 0}])")) ==
          "F: peers[0]: the override sets nothing; add one of base_time, factor, jitter, slow, "
          "uplink, downlink, fail_at, join_at, leave_at, rejoin_at");
    CHECK(error_of(R"({"network": {"latency": 0, "bandwidth": 1e9, "links": [{"between": [2, 2],
        "latency": 1}]}, "defaults": {"base_time": 0.1}})") ==
          "F: network.links[0].between: a link from peer 2 to itself; remove it: a peer does not "
          "send to itself");
    CHECK(
        error_of(R"({"network": {"latency": 0, "bandwidth": 1e9, "links": [{"from": 0,
        "to": 1}]}, "defaults": {"base_time": 0.1}})") ==
        R"(F: network.links[0]: the override sets neither latency nor bandwidth; add "latency" or "bandwidth")");
    CHECK(error_of(R"({"network": {"latency": 0, "bandwidth": 1e9}, "defaults": {"factor": 2}})") ==
          R"(F: defaults: missing key "base_time"; add "base_time")");
    CHECK(error_of(R"({"defaults": {"base_time": 0.1}})") ==
          R"(F: (root): missing key "network"; add "network")");
    CHECK(
        error_of(R"({"network": {"latency": 0, "bandwidth": 1e9}, "defaults": {"base_time":
        0.1, "fail_at": 3}})") ==
        R"(F: defaults.fail_at: a failure time in "defaults" would stop every peer; set "fail_at" per peer under "peers")");
    CHECK(error_of(with(R"("version": 2)")).rfind("F: version: 2 is out of range", 0) == 0);
}

TEST_CASE("bad input: times, factors and rates past their ranges name the range and the fix") {
    // Real peers padded nothing for base_time 1e10..1e300 and sim printed 300-digit times.
    CHECK(error_of(R"({"network": {"latency": 1e-5, "bandwidth": 1e9},
        "defaults": {"base_time": 1e300}})") ==
          "F: defaults.base_time: base_time 1e+300 seconds is out of range; it must lie in (0, "
          "86400] seconds; use at most 86400 seconds (docs/formats/cluster-format.md, \"Ranges\")");
    CHECK(error_of(with(R"("peers": [{"rank": 1, "base_time": 1e10}])"))
              .rfind("F: peers[0].base_time: base_time 1e+10 seconds is out of range", 0) == 0);
    CHECK(error_of(with(R"("peers": [{"rank": 1, "factor": 1e5}])"))
              .rfind("F: peers[0].factor: factor 100000 is out of range; it must lie in (0, "
                     "10000]",
                     0) == 0);
    // Each value in range, their product (the declared step time) not.
    CHECK(error_of(with(R"("peers": [{"rank": 1, "base_time": 100, "factor": 1000}])")) ==
          "F: peers[0].factor: rank 1's steps take base_time x factor = 100 x 1000 = 100000 s; "
          "a declared step time must lie in (0, 86400] seconds (a day); lower base_time or "
          "factor (docs/formats/cluster-format.md, \"Ranges\")");
    CHECK(error_of(R"({"network": {"latency": 0, "bandwidth": 1e9},
        "defaults": {"base_time": 10, "factor": 9000}})")
              .rfind("F: defaults.factor: the default steps take base_time x factor", 0) == 0);
    CHECK(error_of(with(R"("peers": [{"rank": 3, "fail_at": 1e12}])"))
              .rfind("F: peers[0].fail_at: fail_at 1e+12 seconds is out of range; it must lie "
                     "in [0, 1e+09] seconds",
                     0) == 0);
    auto slow = [](const std::string& period) {
        return error_of(with(R"("peers": [{"rank": 1, "slow": [)" + period + "]}]"));
    };
    CHECK(slow(R"({"from": 2e9, "factor": 2})")
              .rfind("F: peers[0].slow[0].from: from 2e+09 seconds is out of range", 0) == 0);
    CHECK(slow(R"({"from": 1, "to": 1e200, "factor": 2})")
              .rfind("F: peers[0].slow[0].to: to 1e+200 seconds is out of range", 0) == 0);
    CHECK(slow(R"({"from": 1, "to": 2, "factor": 1e6})")
              .rfind("F: peers[0].slow[0].factor: slow factor 1e+06 is out of range; it must lie "
                     "in [1, 10000]",
                     0) == 0);
    CHECK(error_of(with(R"("peers": [{"rank": 0, "jitter": {"distribution": "lognormal",
        "sigma": 50}}])"))
              .rfind("F: peers[0].jitter.sigma: sigma 50 is out of range; it must lie in [0, 3]",
                     0) == 0);
    CHECK(error_of(R"({"network": {"latency": 1e300, "bandwidth": 1e9},
        "defaults": {"base_time": 0.1}})")
              .rfind("F: network.latency: latency 1e+300 seconds is out of range; it must lie in "
                     "[0, 86400] seconds",
                     0) == 0);
    CHECK(error_of(R"({"network": {"latency": 0, "bandwidth": 1e9, "links": [{"from": 0, "to": 1,
        "latency": 1e6}]}, "defaults": {"base_time": 0.1}})")
              .rfind("F: network.links[0].latency: latency 1e+06 seconds is out of range", 0) == 0);
    CHECK(error_of(R"({"network": {"latency": 0, "bandwidth": 1e-300},
        "defaults": {"base_time": 0.1}})")
              .rfind("F: network.bandwidth: bandwidth 1e-300 bytes/s is out of range; it must lie "
                     "in [1, 1e+15] bytes/s",
                     0) == 0);
    CHECK(error_of(with(R"("peers": [{"rank": 0, "uplink": 1e300}])"))
              .rfind("F: peers[0].uplink: uplink 1e+300 bytes/s is out of range", 0) == 0);
    // The ends of the ranges load.
    CHECK(error_of(R"({"network": {"latency": 86400, "bandwidth": 1},
        "defaults": {"base_time": 86400}, "peers": [{"rank": 1, "fail_at": 1e9,
        "slow": [{"from": 0, "to": 1e9, "factor": 1e4}],
        "jitter": {"distribution": "lognormal", "sigma": 3}}]})") == "");
}

TEST_CASE("network.model: fair by default, fifo on request, anything else refused") {
    const auto with_model = [](const std::string& model) {
        return R"({"network": {"latency": 1e-5, "bandwidth": 1e9, "model": )" + model +
               R"(}, "defaults": {"base_time": 0.1}})";
    };
    CHECK(parse(with(""), 4).network_model == NetworkModel::fair);
    CHECK(parse(with_model(R"("fifo")"), 4).network_model == NetworkModel::fifo);
    CHECK(parse(with_model(R"("fair")"), 4).network_model == NetworkModel::fair);
    CHECK(error_of(with_model(R"("tcp")"))
              .rfind(R"(F: network.model: unknown network model "tcp"; use "fair")", 0) == 0);
    CHECK(error_of(with_model("1")).rfind("F: network.model: expected a string", 0) == 0);
    CHECK(network_model_from("fifo") == NetworkModel::fifo);
    CHECK_FALSE(network_model_from("FIFO"));
    CHECK(std::string(to_string(NetworkModel::fair)) == "fair");
}

TEST_CASE("churn: join_at, leave_at and rejoin_at load and are checked together per rank") {
    Cluster c = parse(with(R"("peers": [
        {"rank": 1, "join_at": 2.5},
        {"rank": 2, "leave_at": 4},
        {"rank": 3, "fail_at": 1},
        {"rank": 3, "rejoin_at": 3, "leave_at": 7}])"),
                      4);
    CHECK(c.has_churn());
    CHECK(c.peers[0].join_at == 0.0);
    CHECK(c.peers[0].leave_at == never);
    CHECK(c.peers[0].rejoin_at == never);
    CHECK(c.peers[1].join_at == 2.5);
    CHECK(c.peers[2].leave_at == 4.0);
    CHECK(c.peers[3].fail_at == 1.0);
    CHECK(c.peers[3].rejoin_at == 3.0);
    CHECK(c.peers[3].leave_at == 7.0);
    CHECK_FALSE(parse(with(R"("peers": [{"rank": 3, "fail_at": 1}])"), 4).has_churn());
}

TEST_CASE("churn: each bad combination is one line naming the file, the rank and the field") {
    // rejoin_at without fail_at (the error sits at the field, and names the rank).
    CHECK(error_of(with(R"("peers": [{"rank": 2, "rejoin_at": 5}])")) ==
          "F: peers[0].rejoin_at: rank 2 has rejoin_at 5 but no fail_at: only a crashed peer "
          "rejoins; add \"fail_at\" earlier than rejoin_at, or use \"join_at\" for a peer "
          "that enters late");
    // rejoin_at <= fail_at, also when the two come from different entries.
    CHECK(error_of(with(R"("peers": [{"rank": 1, "fail_at": 5}, {"rank": 1, "rejoin_at": 5}])")) ==
          "F: peers[1].rejoin_at: rank 1 rejoins at 5 s but fails only at 5 s; make rejoin_at "
          "later than fail_at");
    // leave_at <= join_at.
    CHECK(error_of(with(R"("peers": [{"rank": 3, "join_at": 4, "leave_at": 2}])")) ==
          "F: peers[0].leave_at: rank 3 leaves at 2 s but joins at 4 s, so it is never in the "
          "job; make leave_at later than join_at (join_at is 0 when not given)");
    CHECK(error_of(with(R"("peers": [{"rank": 0, "leave_at": 0}])"))
              .rfind("F: peers[0].leave_at: rank 0 leaves at 0 s but joins at 0 s", 0) == 0);
    // fail_at before the peer joined.
    CHECK(error_of(with(R"("peers": [{"rank": 1, "join_at": 3, "fail_at": 2}])")) ==
          "F: peers[0].fail_at: rank 1 fails at 2 s but joins only at 3 s; make fail_at later "
          "than join_at");
    // A crash with no rejoin, then a leave.
    CHECK(error_of(with(R"("peers": [{"rank": 1, "fail_at": 2, "leave_at": 3}])")) ==
          "F: peers[0].leave_at: rank 1 fails at 2 s and never rejoins, so it cannot leave at "
          "3 s; keep one of fail_at and leave_at, or add rejoin_at between them");
    // A leave before the rejoin.
    CHECK(
        error_of(with(R"("peers": [{"rank": 1, "fail_at": 2, "rejoin_at": 5, "leave_at": 4}])")) ==
        "F: peers[0].leave_at: rank 1 leaves at 4 s, not after it rejoins at 5 s; order the "
        "times join_at < fail_at < rejoin_at < leave_at");
    // Negative times.
    for (const char* field : {"join_at", "leave_at", "rejoin_at"}) {
        CAPTURE(field);
        const std::string msg =
            error_of(with(fmt::format(R"("peers": [{{"rank": 2, "{}": -1}}])", field)));
        CHECK(msg.rfind(fmt::format("F: peers[0].{}: {} must be >= 0, found -1;", field, field),
                        0) == 0);
    }
    // Every peer absent at t = 0: the first to join is named.
    CHECK(
        error_of(with(R"("peers": [{"range": [0, 3], "join_at": 2}, {"rank": 2, "leave_at": 9}])"),
                 4) ==
        "F: peers[0].join_at: every peer joins after t = 0 (the first, rank 0, at 2 s): nobody "
        "starts the job; let at least one peer start at t = 0 (drop its join_at)");
    // In "defaults" they would apply to every peer.
    CHECK(
        error_of(R"({"network": {"latency": 1e-5, "bandwidth": 1e9},
                       "defaults": {"base_time": 0.1, "join_at": 3}})") ==
        R"(F: defaults.join_at: "join_at" in "defaults" would apply to every peer; set "join_at" per peer under "peers" (docs/operations/elastic.md))");
}
