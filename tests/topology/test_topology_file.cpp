#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "gossamer/core/error.hpp"
#include "gossamer/core/memory.hpp"
#include "gossamer/topology/analysis.hpp"
#include "gossamer/topology/build_size.hpp"
#include "gossamer/topology/topology_file.hpp"
#include "support/temp_dir.hpp"

using namespace gossamer::topology;
using gossamer::ConfigError;

namespace {

// Loads `text` as a topology file and returns the ConfigError message with the file name
// replaced by "F", or "" when it loads.
std::string error_of(const std::string& text) {
    gossamer::test::TempDir dir;
    const std::string path = dir.write("t.json", text);
    try {
        load_topology(path);
    } catch (const ConfigError& e) {
        std::string msg = e.what();
        CHECK(msg.find('\n') == std::string::npos);  // one line
        if (msg.rfind(path, 0) == 0) msg = "F" + msg.substr(path.size());
        return msg;
    }
    return "";
}

}  // namespace

TEST_CASE("every example topology loads and validates") {
    const std::filesystem::path dir =
        std::filesystem::path(GOSSAMER_SOURCE_DIR) / "examples/topologies";
    int count = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        if (entry.path().extension() != ".json") continue;
        CAPTURE(entry.path().string());
        Topology t = load_topology(entry.path().string());
        CHECK(t.n() >= 2);
        CHECK(analyse(*t.schedule).strongly_connected);
        ++count;
    }
    CHECK(count >= 6);
}

TEST_CASE("peers: a count on one host or an explicit list") {
    gossamer::test::TempDir dir;
    auto t = load_topology(
        dir.write("a.json", R"({"peers": {"count": 3, "host": "10.0.0.1", "base_port": 4000},
        "graph": {"family": "ring"}})"));
    REQUIRE(t.n() == 3);
    CHECK(t.peers[2].host == "10.0.0.1");
    CHECK(t.peers[2].port == 4002);
    CHECK(t.family.has_value());
    auto u = load_topology(
        dir.write("b.json", R"({"peers": [{"host": "a", "port": 1}, {"host": "b", "port": 1}],
        "graph": {"edges": [[0, 1]]}})"));
    CHECK(u.peers[1].host == "b");
    CHECK(u.schedule->at(0)->weights.at(0, 1) == 0.5);
}

TEST_CASE("explicit edges, schedules and weights") {
    gossamer::test::TempDir dir;
    auto t = load_topology(dir.write("s.json", R"({"peers": {"count": 4}, "graph": {"schedule": [
        [[0, 1], [2, 3]], [[1, 2], [3, 0]]]}, "weights": "metropolis_hastings"})"));
    CHECK(t.schedule->period() == 2);
    CHECK(t.schedule->at(3)->graph.has_edge(3, 0));
    auto d =
        load_topology(dir.write("d.json", R"({"peers": {"count": 3}, "graph": {"directed": true,
        "edges": [[0, 1, 0.5], [1, 2, 0.5], [2, 0, 0.5], [0, 0, 0.5], [1, 1, 0.5], [2, 2, 0.5]]},
        "weights": {"rule": "explicit", "kind": "push_sum"}})"));
    CHECK(d.schedule->kind() == WeightKind::push_sum);
    CHECK(d.schedule->at(0)->weights.at(1, 0) == 0.5);  // receiver 1 from sender 0
    CHECK(d.schedule->at(0)->graph.has_edge(0, 1));
    CHECK_FALSE(d.schedule->at(0)->graph.has_edge(1, 0));
}

TEST_CASE("bad input: invalid JSON, with line and column") {
    CHECK(
        error_of("{\"peers\": {\"count\": 4},\n \"graph\": {\"family\": ring}}").rfind("F:2:", 0) ==
        0);
}

TEST_CASE("bad input: a missing or unreadable file") {
    try {
        load_topology("/no/such/topology.json");
        FAIL("expected ConfigError");
    } catch (const ConfigError& e) {
        CHECK(std::string(e.what()) ==
              "/no/such/topology.json: cannot open file: No such file or directory; check the "
              "path and its permissions");
    }
    gossamer::test::TempDir dir;
    CHECK_THROWS_AS(load_topology(dir.path().string()), ConfigError);  // a folder, not a file
}

TEST_CASE("bad input: unknown keys") {
    CHECK(
        error_of(R"({"peers": {"count": 4}, "grph": {}})") ==
        R"(F: grph: unknown key "grph"; did you mean "graph"? allowed keys: version, name, description, peers, graph, weights)");
    CHECK(error_of(R"({"peers": {"count": 4}, "graph": {"family": "ring", "p": 0.5}})")
              .rfind(R"(F: graph.p: unknown key "p")", 0) == 0);
}

TEST_CASE("bad input: wrong types") {
    CHECK(error_of(R"({"peers": {"count": "4"}, "graph": {"family": "ring"}})") ==
          R"(F: peers.count: expected an integer, found the string "4")");
    CHECK(error_of(R"({"peers": {"count": 4}, "graph": {"edges": [[0, 1.5]]}})") ==
          "F: graph.edges[0][1]: expected an integer, found a number");
    CHECK(error_of(R"({"peers": {"count": 4}, "graph": {"family": "ring"}, "weights": 3})")
              .rfind("F: weights: expected a string, found an integer", 0) == 0);
}

TEST_CASE("bad input: rank or edge out of range") {
    CHECK(error_of(R"({"peers": {"count": 4}, "graph": {"edges": [[0, 1], [1, 4]]}})") ==
          "F: graph.edges[1][1]: rank 4 is out of range for 4 peers; ranks run from 0 to 3");
    CHECK(error_of(R"({"peers": {"count": 4}, "graph": {"edges": [[-1, 1]]}})")
              .rfind("F: graph.edges[0][0]: rank -1 is out of range", 0) == 0);
}

TEST_CASE("bad input: duplicate edges") {
    CHECK(error_of(R"({"peers": {"count": 3}, "graph": {"edges": [[0, 1], [1, 2], [1, 0]]}})") ==
          "F: graph.edges[2]: duplicate edge 1 -- 0 (also at graph.edges[0]); list each edge once");
    // Directed: 1 -> 0 is another edge than 0 -> 1, but 0 -> 1 twice is a duplicate.
    CHECK(
        error_of(
            R"({"peers": {"count": 2}, "graph": {"directed": true, "edges": [[0, 1], [1, 0]]}})") ==
        "");
    CHECK(
        error_of(
            R"({"peers": {"count": 2}, "graph": {"directed": true, "edges": [[0, 1], [1, 0], [0, 1]]}})")
            .rfind("F: graph.edges[2]: duplicate edge 0 -> 1", 0) == 0);
}

TEST_CASE("bad input: negative or non-finite weights") {
    const char* head =
        R"({"peers": {"count": 2}, "weights": {"rule": "explicit", "kind": "averaging"}, "graph": {"edges": )";
    CHECK(error_of(std::string(head) + R"([[0, 1, -0.5], [0, 0, 1.5], [1, 1, 1.5]]}})") ==
          "F: graph.edges[0][2]: weight -0.5 is negative; use a weight >= 0");
    CHECK(error_of(std::string(head) + R"([[0, 1, 1e999], [0, 0, 0.5], [1, 1, 0.5]]}})")
              .find("invalid JSON: number overflow") != std::string::npos);
    CHECK(error_of(std::string(head) + R"([[0, 1, 0.5], [0, 0, 0.5], [1, 1, 0.5]]}})") == "");
}

TEST_CASE("bad input: explicit weights whose rows or columns do not sum to 1") {
    CHECK(error_of(R"({"peers": {"count": 2}, "weights": {"rule": "explicit", "kind": "averaging"},
        "graph": {"edges": [[0, 1, 0.5], [0, 0, 0.5], [1, 1, 0.4]]}})") ==
          "F: graph.edges: row 1 of W sums to 0.9, not 1 (averaging weights need row sums of 1 "
          "within 1e-09); fix the weights, including the self-loops [i, i, w]");
    // Directed push-sum: sender 0 gives 0.5 to 1 and keeps 0.4: column 0 sums to 0.9.
    CHECK(error_of(R"({"peers": {"count": 2}, "weights": {"rule": "explicit", "kind": "push_sum"},
        "graph": {"directed": true, "edges": [[0, 1, 0.5], [1, 0, 0.5], [0, 0, 0.4], [1, 1, 0.5]]}})")
              .rfind("F: graph.edges: column 0 of W sums to 0.9", 0) == 0);
    // Within 1e-9 passes.
    CHECK(error_of(R"({"peers": {"count": 2}, "weights": {"rule": "explicit", "kind": "averaging"},
        "graph": {"edges": [[0, 1, 0.5], [0, 0, 0.5000000001], [1, 1, 0.5]]}})") == "");
    CHECK(
        error_of(
            R"({"peers": {"count": 2}, "weights": {"rule": "explicit"}, "graph": {"edges": [[0, 1]]}})")
            .rfind("F: weights: explicit weights must declare their kind", 0) == 0);
}

TEST_CASE("bad input: a schedule never connected over its period") {
    CHECK(error_of(R"({"peers": {"count": 4}, "graph": {"schedule": [[[0, 1]], [[2, 3]]]}})") ==
          "F: graph: the schedule is never connected over its period: the union of its 2 rounds "
          "has 2 strongly connected components; add edges that join the components");
    CHECK(error_of(R"({"peers": {"count": 3}, "graph": {"edges": [[0, 1]]}})")
              .rfind("F: graph: the graph is not strongly connected (2 components)", 0) == 0);
    CHECK(error_of(
              R"({"peers": {"count": 3}, "graph": {"directed": true, "edges": [[0, 1], [1, 2]]}})")
              .rfind("F: graph: the graph is not strongly connected (3 components)", 0) == 0);
}

TEST_CASE("bad input: a family that needs a power of two") {
    CHECK(error_of(R"({"peers": {"count": 12}, "graph": {"family": "one_peer_exponential"}})") ==
          "F: graph.family: one_peer_exponential needs n to be a power of two, got n = 12; use n "
          "= 8 or n = 16");
    CHECK(error_of(R"({"peers": {"count": 6}, "graph": {"family": "hypercube"}})")
              .rfind("F: graph.family: hypercube needs n to be a power of two", 0) == 0);
}

TEST_CASE("bad input: an empty peer list and duplicate host:port") {
    CHECK(error_of(R"({"peers": [], "graph": {"family": "ring"}})") ==
          R"(F: peers: the peer list is empty; list at least one peer, or use {"count": N})");
    CHECK(error_of(R"({"peers": {"count": 0}, "graph": {"family": "ring"}})")
              .rfind("F: peers.count: 0 is out of range", 0) == 0);
    CHECK(
        error_of(
            R"({"peers": [{"host": "a", "port": 5}, {"host": "b", "port": 5}, {"host": "a", "port": 5}],
        "graph": {"family": "ring"}})") ==
        "F: peers[2]: duplicate address a:5 (also peers[0]); give every peer its own host:port");
}

TEST_CASE("bad input: other inconsistencies") {
    CHECK(error_of(R"({"peers": {"count": 4}})") ==
          R"(F: (root): missing key "graph"; add "graph")");
    CHECK(error_of(R"({"peers": {"count": 4}, "graph": {"family": "ring", "edges": []}})")
              .rfind(R"(F: graph: give exactly one of "family", "edges" or "schedule")", 0) == 0);
    CHECK(error_of(R"({"peers": {"count": 4}, "graph": {"family": "rign"}})")
              .rfind(R"(F: graph.family: unknown family "rign"; did you mean "ring"?)", 0) == 0);
    CHECK(
        error_of(
            R"({"peers": {"count": 4}, "graph": {"family": "exponential"}, "weights": "metropolis_hastings"})")
            .rfind("F: graph.family: metropolis_hastings weights need an undirected graph", 0) ==
        0);
    CHECK(error_of(R"({"peers": {"count": 4}, "graph": {"edges": [[0, 1], [1, 1]]}})")
              .rfind("F: graph.edges[1]: self-loop 1 -> 1", 0) == 0);
    CHECK(error_of(R"({"peers": {"count": 4}, "graph": {"edges": [[0, 1, 0.5]]}})")
              .rfind("F: graph.edges[0][2]: an edge weight needs explicit weights", 0) == 0);
    CHECK(error_of(R"({"peers": {"count": 20}, "graph": {"family": "erdos_renyi", "p": 0.01}})")
              .rfind("F: graph.family: erdos_renyi with n = 20 and p = 0.01 was not connected",
                     0) == 0);
    CHECK(error_of(R"({"peers": {"count": 3, "base_port": 65534}, "graph": {"family": "ring"}})")
              .rfind("F: peers.count: count 3: peers on ports 65534..65536 run past 65535", 0) ==
          0);
}

TEST_CASE("bad input: too many peers for the ports names base_port only where the file gives it") {
    const auto defaulted = error_of(R"({"peers": {"count": 40000}, "graph": {"family": "ring"}})");
    CHECK(defaulted ==
          "F: peers.count: count 40000: peers on ports 29500..69499 (from the default base_port "
          "29500) run past 65535; lower count to 36036 or less, or give a base_port of 25536 or "
          "less");
    const auto given =
        error_of(R"({"peers": {"count": 10, "base_port": 65530}, "graph": {"family": "ring"}})");
    CHECK(given.rfind("F: peers.count: count 10: peers on ports 65530..65539 run past 65535; "
                      "lower count to 6 or less, or base_port to 65526 or less",
                      0) == 0);
    CHECK(error_of(R"({"peers": {"count": 70000, "base_port": 1}, "graph": {"family": "ring"}})")
              .find("at most 65535 peers fit on one host's ports; lower count") !=
          std::string::npos);
}

TEST_CASE("bad input: a directory or duplicate keys") {
    gossamer::test::TempDir dir;
    try {
        load_topology(dir.path().string());
        FAIL("expected ConfigError");
    } catch (const ConfigError& e) {
        CHECK(std::string(e.what()).rfind(dir.path().string() + ": is a directory", 0) == 0);
    }
    CHECK(error_of(R"({"peers": {"count": 4}, "graph": {"family": "ring"}, "weights": "uniform",
                       "weights": "max_degree"})")
              .rfind(R"(F: weights: duplicate key "weights")", 0) == 0);
}

TEST_CASE("the file written for a family loads back to the same schedule") {
    gossamer::test::TempDir dir;
    FamilySpec s;
    s.family = "erdos_renyi";
    s.n = 12;
    s.p = 0.4;
    s.seed = 9;
    s.weights = WeightRule::metropolis_hastings;
    auto t = load_topology(dir.write("er.json", family_topology_json(s, {}).dump()));
    CHECK(t.family->p == 0.4);
    CHECK(t.family->seed == 9);
    CHECK(t.weights == WeightRule::metropolis_hastings);
    CHECK(t.schedule->at(0)->graph.edges() == generate(s)->at(0)->graph.edges());
}

TEST_CASE("peers: a count over several hosts, in blocks, past one host's ports") {
    gossamer::test::TempDir dir;
    auto t = load_topology(dir.write("h.json", R"({"peers": {"count": 5, "hosts": ["n0", "n1"],
        "base_port": 4000}, "graph": {"family": "ring"}})"));
    REQUIRE(t.n() == 5);
    // ceil(5 / 2) = 3 per host: n0 gets ranks 0..2, n1 ranks 3 and 4.
    CHECK(t.peers[0].host == "n0");
    CHECK(t.peers[2].host == "n0");
    CHECK(t.peers[2].port == 4002);
    CHECK(t.peers[3].host == "n1");
    CHECK(t.peers[3].port == 4000);
    CHECK(t.peers[4].port == 4001);
    // A million simulated peers: 16 hosts of 65,536 ports each would not fit from 29500, 32 do.
    std::string hosts;
    for (int i = 0; i < 32; ++i)
        hosts += (i ? ", " : "") + std::string("\"h") + std::to_string(i) + "\"";
    auto m = load_topology(
        dir.write("m.json", R"({"peers": {"count": 1048576, "hosts": [)" + hosts +
                                R"(], "base_port": 1}, "graph": {"family": "ring"}})"));
    CHECK(m.n() == 1048576);
    CHECK(m.peers.back().host == "h31");
    CHECK(m.peers.back().port == 32768);
}

TEST_CASE("bad input: a count over hosts names what is wrong") {
    CHECK(
        error_of(
            R"({"peers": {"count": 4, "host": "a", "hosts": ["b"]}, "graph": {"family": "ring"}})")
            .rfind("F: peers.hosts: both \"host\" and \"hosts\" are given", 0) == 0);
    CHECK(error_of(R"({"peers": {"count": 4, "hosts": []}, "graph": {"family": "ring"}})")
              .rfind("F: peers.hosts: expected a non-empty list of host names", 0) == 0);
    CHECK(error_of(R"({"peers": {"count": 4, "hosts": ["a", "a"]}, "graph": {"family": "ring"}})")
              .rfind("F: peers.hosts[1]: duplicate host a (also hosts[0])", 0) == 0);
    CHECK(error_of(R"({"peers": {"count": 4, "hosts": ["a", ""]}, "graph": {"family": "ring"}})")
              .rfind("F: peers.hosts[1]: empty host name", 0) == 0);
    CHECK(
        error_of(
            R"({"peers": {"count": 200000, "hosts": ["a", "b"]}, "graph": {"family": "ring"}})") ==
        "F: peers.count: count 200000 (100000 per host on 2 hosts): peers on ports 29500..129499 "
        "(from the default base_port 29500) run past 65535; at most 65535 peers fit on one "
        "host's ports; lower count, or spread the peers over several hosts with \"hosts\": [...]");
    CHECK(error_of(R"({"peers": {"count": 70000, "base_port": 1}, "graph": {"family": "ring"}})")
              .find("spread the peers over several hosts with \"hosts\"") != std::string::npos);
}

TEST_CASE("sizes: family_size counts the edges generate() builds, for every family") {
    for (auto family : family_names()) {
        for (int n : {1, 2, 3, 8, 16, 64}) {
            FamilySpec spec;
            spec.family = std::string(family);
            spec.n = n;
            spec.p = 1.0;  // erdos_renyi: every pair, so the count is exact
            std::shared_ptr<const Schedule> s;
            try {
                s = generate(spec);
            } catch (const gossamer::TopologyError&) {
                continue;  // n not a power of two for this family
            }
            CAPTURE(family);
            CAPTURE(n);
            const auto size = family_size(spec);
            double largest = 0, total = 0;
            for (std::int64_t t = 0; t < s->period().value_or(1); ++t) {
                const auto edges = static_cast<double>(s->at(t)->graph.edges().size());
                largest = std::max(largest, edges);
                total += edges;
            }
            CHECK(size.round_edges >= largest);  // an upper bound: a torus of 2 x 1 merges edges
            CHECK(size.round_edges <= largest + 4.0 * n);
            CHECK(size.total_edges >= total);
        }
    }
}

TEST_CASE("bad input: a topology too large to build is refused before it is built") {
    const auto start = std::chrono::steady_clock::now();
    // 2^20 peers, complete: 1.1e12 edges, past what a round can hold (and any memory).
    CHECK(
        error_of(
            R"({"peers": {"count": 1048576, "base_port": 1, "hosts": ["h0", "h1", "h2", "h3", "h4", "h5", "h6", "h7", "h8", "h9", "h10", "h11", "h12", "h13", "h14", "h15", "h16", "h17", "h18", "h19"]},
                       "graph": {"family": "complete"}})") ==
        "F: graph.family: the complete graph of 1048576 peers has 1099510579200 directed edges "
        "in one round, more than the 2147483647 a round can hold; use fewer peers, or a sparse "
        "family (ring, torus, exponential, one_peer_exponential)");
    // erdos_renyi draws every pair, however small p is.
    CHECK(error_of(R"({"peers": {"count": 100000, "base_port": 1, "hosts": ["a", "b"]},
                       "graph": {"family": "erdos_renyi", "p": 0.0001, "seed": 1}})") ==
          "F: graph.family: the erdos_renyi graph of 100000 peers draws each of its 4999950000 "
          "pairs, more than the 2147483647 a generator may visit; use fewer peers, or a sparse "
          "family (ring, torus, exponential, one_peer_exponential)");
    // Within the index bound, the memory decides: 40,000 peers, complete, is 1.6e9 edges,
    // about 77 GB to build.
    const auto big = family_size({"complete", 40000});
    CHECK(build_bytes(big) > 70e9);
    const auto limit = gossamer::memory_limit();
    if (limit && limit->bytes < build_bytes(big))  // a machine with more would build it
        CHECK(error_of(
                  R"({"peers": {"count": 40000, "base_port": 1}, "graph": {"family": "complete"}})")
                  .rfind("F: graph.family: the complete graph of 40000 peers (1599960000 directed "
                         "edges) needs about ",
                         0) == 0);
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
}
