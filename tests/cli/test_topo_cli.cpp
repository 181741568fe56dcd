// The gossamer binary as a user runs it: exit statuses, one-line errors, output formats.
#include <doctest/doctest.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "support/run.hpp"
#include "support/temp_dir.hpp"

using gossamer::test::run;
using gossamer::test::RunResult;
using gossamer::test::TempDir;

namespace {

const std::string kBin = GOSSAMER_BINARY;
const std::string kExamples = std::string(GOSSAMER_SOURCE_DIR) + "/examples/topologies/";

RunResult cli(const std::string& args) {
    return run(kBin + " " + args);
}

// A failure is exit 2 and exactly one line on stderr that contains `text`.
void check_one_line_error(const RunResult& r, const std::string& text) {
    CAPTURE(r.err);
    CHECK(r.status == 2);
    CHECK(r.err.find(text) != std::string::npos);
    CHECK(r.err.rfind("error: ", 0) == 0);
    CHECK(r.err.find('\n') == r.err.size() - 1);
}

}  // namespace

TEST_CASE("--help lists the commands, and an unknown command is one line and exit 2") {
    auto help = cli("--help");
    CHECK(help.status == 0);
    CHECK(help.out.find("topo") != std::string::npos);
    auto topo_help = cli("topo --help");
    CHECK(topo_help.status == 0);
    for (const char* cmd : {"show", "validate", "gen", "matrix", "dot"})
        CHECK(topo_help.out.find(cmd) != std::string::npos);
    check_one_line_error(cli("frobnicate"), "unknown command 'frobnicate'");
    check_one_line_error(cli("topo shwo x.json"), "unknown command 'shwo'");
    CHECK(cli("").status == 2);
}

TEST_CASE("an unknown option is one line and exit 2, with a suggestion") {
    check_one_line_error(cli("topo show " + kExamples + "ring8.json --jsn"),
                         "unknown option '--jsn' (did you mean '--json'?)");
    check_one_line_error(cli("topo show"), "missing argument");
    check_one_line_error(cli("topo validate a.json b.json"), "unexpected argument 'b.json'");
    check_one_line_error(cli("topo matrix " + kExamples + "ring8.json --round x"),
                         "--round: \"x\" is not an integer");
    check_one_line_error(cli("topo show " + kExamples + "ring8.json --model-bytes 4QB"),
                         "--model-bytes: \"4QB\" is not a size");
}

TEST_CASE("topo show --json has the documented keys for every example") {
    for (const char* f : {"ring8.json", "torus16.json", "exp16.json", "one-peer-exp16.json",
                          "schedule6.json", "directed-pushsum5.json"}) {
        CAPTURE(f);
        auto r = cli("topo show --json " + kExamples + f);
        REQUIRE(r.status == 0);
        auto j = nlohmann::json::parse(r.out);
        for (const char* key : {"n", "period", "directed", "strongly_connected", "row_stochastic",
                                "column_stochastic", "symmetric", "slem", "spectral_gap",
                                "rounds_to_1e-6", "max_degree"})
            CHECK_MESSAGE(j.contains(key), key);
        CHECK(j["strongly_connected"] == true);
    }
    auto ring = nlohmann::json::parse(cli("topo show --json " + kExamples + "ring8.json").out);
    CHECK(ring["slem"].get<double>() == doctest::Approx(0.8047378541));
    CHECK(ring["n"] == 8);
}

TEST_CASE("topo show prints a table") {
    auto r = cli("topo show " + kExamples + "one-peer-exp16.json");
    CHECK(r.status == 0);
    CHECK(r.out.find("SLEM (period product)") != std::string::npos);
    CHECK(r.out.find("rounds to 1e-06        4") != std::string::npos);
}

TEST_CASE("topo validate: exit 0, or exit 2 with the reason") {
    auto ok = cli("topo validate " + kExamples + "schedule6.json");
    CHECK(ok.status == 0);
    CHECK(ok.out.find(": ok: explicit schedule (n = 6, period 3)") != std::string::npos);
    TempDir dir;
    auto bad = dir.write(
        "bad.json", R"({"peers": {"count": 12}, "graph": {"family": "one_peer_exponential"}})");
    check_one_line_error(cli("topo validate " + bad),
                         bad + ": graph.family: one_peer_exponential needs n to be a power of two");
    check_one_line_error(cli("topo validate /no/such/file.json"),
                         "/no/such/file.json: cannot open file");
    auto broken = dir.write("broken.json", "{\"peers\": {\"count\": 3},\n\n  \"graph\": }");
    check_one_line_error(cli("topo validate " + broken), broken + ":3:");
}

TEST_CASE("topo gen writes a file that validates, and refuses bad parameters") {
    TempDir dir;
    for (const char* args : {"--family ring --n 8", "--family torus --n 12 --rows 3",
                             "--family hypercube --n 16 --weights metropolis_hastings",
                             "--family one_peer_exponential --n 32 --weights push_sum",
                             "--family random_matching --n 10 --seed 4",
                             "--family erdos_renyi --n 20 --p 0.3 --seed 2",
                             "--family exponential --n 12 --host 10.1.1.1 --base-port 7000"}) {
        CAPTURE(args);
        auto r = cli(std::string("topo gen ") + args);
        REQUIRE(r.status == 0);
        auto path = dir.write("gen.json", r.out);
        CHECK(cli("topo validate " + path).status == 0);
    }
    auto j = nlohmann::json::parse(
        cli("topo gen --family exponential --n 12 --host 10.1.1.1 --base-port 7000").out);
    CHECK(j["peers"]["host"] == "10.1.1.1");
    CHECK(j["peers"]["base_port"] == 7000);
    check_one_line_error(cli("topo gen --family one_peer_exponential --n 12"),
                         "needs n to be a power of two, got n = 12; use n = 8 or n = 16");
    check_one_line_error(cli("topo gen --family rng --n 12"), "unknown family \"rng\"");
    check_one_line_error(cli("topo gen --n 12"), "--family is required");
    check_one_line_error(cli("topo gen --family ring"), "--n is required");
    check_one_line_error(cli("topo gen --family ring --n 0"), "--n: 0 is out of range");
    check_one_line_error(cli("topo gen --family erdos_renyi --n 10"), "--p:");
    check_one_line_error(cli("topo gen --family exponential --n 8 --weights metropolis_hastings"),
                         "need an undirected graph");
    check_one_line_error(cli("topo gen --family ring --n 8 --weights equal"),
                         "--weights: unknown rule");
}

TEST_CASE("topo gen: more peers than ports names the flag that was given, with its value") {
    auto n = cli("topo gen --family ring --n 70000");
    check_one_line_error(n, "--n 70000: peers on ports 29500..99499 exceed 65535");
    CHECK(n.err.find("lower --n") != std::string::npos);
    auto defaulted = cli("topo gen --family ring --n 40000");
    check_one_line_error(defaulted, "--n 40000: peers on ports 29500..69499 exceed 65535");
    CHECK(defaulted.err.find("lower --n to 36036 or less, or give --base-port 25536 or less") !=
          std::string::npos);
    CHECK(defaulted.err.find("error: --base-port") == std::string::npos);
    check_one_line_error(cli("topo gen --family ring --n 100 --base-port 65500"),
                         "--base-port 65500 with --n 100: peers on ports 65500..65599 exceed "
                         "65535; lower --base-port to 65436 or less, or --n to 36 or less");
    CHECK(cli("topo gen --family ring --n 36036").status == 0);  // 29500..65535 fits
}

TEST_CASE("topo matrix prints W of a round as CSV, topo dot prints Graphviz") {
    auto m = cli("topo matrix " + kExamples + "one-peer-exp16.json --round 1");
    REQUIRE(m.status == 0);
    // Round 1: hop 2, so receiver 2 takes 0.5 from itself and 0.5 from sender 0.
    auto first_rows =
        m.out.substr(0, m.out.find('\n', m.out.find('\n', m.out.find('\n') + 1) + 1) + 1);
    CHECK(first_rows.find("0.5,0,0,0,0,0,0,0,0,0,0,0,0,0,0.5,0") == 0);
    auto third = m.out.substr(m.out.find('\n', m.out.find('\n') + 1) + 1);
    CHECK(third.rfind("0.5,0,0.5,0", 0) == 0);
    auto d = cli("topo dot " + kExamples + "directed-pushsum5.json");
    REQUIRE(d.status == 0);
    CHECK(d.out.rfind("digraph", 0) == 0);
    CHECK(d.out.find("4 -> 0 [label=\"0.3\"]") != std::string::npos);
}

TEST_CASE("a 1024-peer one-peer exponential topology is analysed") {
    TempDir dir;
    auto file =
        dir.write("ope1024.json", cli("topo gen --family one_peer_exponential --n 1024").out);
    auto r = cli("topo show --json " + file);
    REQUIRE(r.status == 0);
    auto j = nlohmann::json::parse(r.out);
    CHECK(j["period"] == 10);
    CHECK(j["rounds_to_1e-6"] == 10);
    CHECK(j["slem"].get<double>() == 0.0);
}

TEST_CASE("topo show of a 65,535-peer ring finishes within a bound and says it bounded the run") {
    TempDir dir;
    auto gen = cli("topo gen --family ring --n 65535 --base-port 1");
    REQUIRE(gen.status == 0);
    auto file = dir.write("ring65535.json", gen.out);
    const auto start = std::chrono::steady_clock::now();
    auto r = cli("topo show --json " + file);
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    CHECK(took < 60.0);  // the test's timeout is 120 s; a million rounds took many minutes
    auto j = nlohmann::json::parse(r.out);
    CHECK(j["n"] == 65535);
    CHECK(j["rounds_to_1e-6"].is_null());
    CHECK(j["max_rounds"].get<std::int64_t>() < 1000000);
    CHECK(j["rounds_note"].get<std::string>().find("bounded to") != std::string::npos);
    CHECK(j["spectral_note"].get<std::string>().find("dense limit") != std::string::npos);
    // A given --max-rounds is kept.
    auto kept = cli("topo show --json --max-rounds 30 " + file);
    REQUIRE(kept.status == 0);
    CHECK(nlohmann::json::parse(kept.out)["max_rounds"] == 30);
    CHECK(nlohmann::json::parse(kept.out)["rounds_note"] == "");
}

TEST_CASE("topo show compares several files and writes their averaging runs") {
    TempDir dir;
    const std::string curves = (dir.path() / "curves").string();
    auto r = cli("topo show " + kExamples + "ring8.json " + kExamples +
                 "torus16.json --curve-dir " + curves);
    REQUIRE(r.status == 0);
    CHECK(r.out.rfind("topology", 0) == 0);
    CHECK(r.out.find("ring8.json") != std::string::npos);
    CHECK(r.out.find("torus16.json") != std::string::npos);
    std::ifstream csv(curves + "/ring8.csv");
    std::string header, first;
    std::getline(csv, header);
    std::getline(csv, first);
    CHECK(header == "round,disagreement");
    CHECK(first == "0,1");
    auto j = nlohmann::json::parse(
        cli("topo show --json " + kExamples + "ring8.json " + kExamples + "torus16.json").out);
    CHECK(j.is_array());
    CHECK(j.size() == 2);
    // One bad file stops the command before any output.
    auto bad = dir.write("bad.json", "{}");
    auto failed = cli("topo show " + kExamples + "ring8.json " + bad);
    check_one_line_error(failed, "missing key \"peers\"");
    CHECK(failed.out.empty());
}

TEST_CASE("usage: topo, bench and lab without a command are one line on stderr, exit 2") {
    for (const std::string cmd : {"topo", "bench", "lab"}) {
        CAPTURE(cmd);
        auto r = cli(cmd);
        check_one_line_error(r, "gossamer " + cmd + ": missing ");
        CHECK(r.err.find("see 'gossamer " + cmd + " --help'") != std::string::npos);
        CHECK(r.out.empty());
        auto help = cli(cmd + " --help");
        CHECK(help.status == 0);
        CHECK(help.out.rfind("usage: gossamer " + cmd, 0) == 0);
    }
}

TEST_CASE("usage: an option given twice or with an empty value is one line naming it") {
    const std::string ring = kExamples + "ring8.json";
    check_one_line_error(cli("topo show " + ring + " --seed 1 --seed 2"),
                         "gossamer topo show: option '--seed' is given twice; give it once");
    check_one_line_error(cli("topo show " + ring + " --json --json"),
                         "option '--json' is given twice");
    check_one_line_error(cli("topo show " + ring + " --seed=1 --seed=1"),
                         "option '--seed' is given twice");
    check_one_line_error(cli("train --config="),
                         "gossamer train: option '--config' has an empty value; write --config "
                         "FILE");
    check_one_line_error(cli("topo show " + ring + " --model-bytes \"\""),
                         "option '--model-bytes' has an empty value");
}

TEST_CASE("bad input: control characters from a file are escaped in the error line") {
    TempDir dir;
    // A family name with an ESC sequence (clear screen), a bell, a carriage return and a C1 CSI.
    const auto path = dir.write("t.json",
                                "{\"peers\": {\"count\": 4}, \"graph\": {\"family\": "
                                "\"ri\\u001b[2Jng\\u0007\\r\\u009b\"}}");
    auto r = cli("topo validate " + path);
    check_one_line_error(r, "unknown family \"ri\\x1b[2Jng\\x07\\x0d\\u009b\"");
    for (char c = 0; c < 0x20; ++c)
        if (c != '\n') CHECK(r.err.find(c) == std::string::npos);
    CHECK(r.err.find("\xc2\x9b") == std::string::npos);
    CHECK(r.err.find('\n') == r.err.size() - 1);
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;  // ASan reserves terabytes of address space: no ulimit -v
#else
constexpr bool kSanitized = false;
#endif

TEST_CASE("bad input: a topology too large to build is refused at once, naming size and limit" *
          doctest::skip(kSanitized)) {
    TempDir dir;
    // 10,000 peers, complete: 10^8 edges, about 5.6 GB; it took 55 s and 5 GB to answer.
    const auto path =
        dir.write("c.json", R"({"peers": {"count": 10000}, "graph": {"family": "complete"}})");
    const auto start = std::chrono::steady_clock::now();
    auto r = run("ulimit -v 2000000 && timeout -s KILL 60 " + kBin + " topo validate " + path);
    check_one_line_error(r, path +
                                ": graph.family: the complete graph of 10000 peers (99990000 "
                                "directed edges) needs about ");
    CHECK((r.err.find("RLIMIT_AS (ulimit -v 2000000)") != std::string::npos ||
           r.err.find("MemAvailable") != std::string::npos));
    CHECK(r.err.find("use fewer peers, or a sparse family") != std::string::npos);
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
    // topo gen refuses it from --n, before generating.
    auto gen = run("ulimit -v 2000000 && timeout -s KILL 60 " + kBin +
                   " topo gen --family complete --n 10000");
    check_one_line_error(gen,
                         "error: --n: the complete graph of 10000 peers (99990000 directed "
                         "edges) needs about ");
    CHECK(gen.out.empty());
    // Past what a round can hold, whatever the machine.
    check_one_line_error(cli("topo gen --family complete --n 60000 --base-port 1"),
                         "--n: the complete graph of 60000 peers has 3599940000 directed edges "
                         "in one round, more than the 2147483647 a round can hold");
}
