#include <doctest/doctest.h>

#include "gossamer/core/error.hpp"
#include "gossamer/core/json.hpp"
#include "support/errors.hpp"
#include "support/temp_dir.hpp"

using gossamer::ConfigError;
using namespace gossamer::json;

using gossamer::test::config_error;
using gossamer::test::contains;

namespace {}  // namespace

TEST_CASE("invalid JSON names the file, line and column") {
    auto msg = config_error([] { parse_text("{\n  \"a\": 1,\n  \"b\": tru\n}", "x.json"); });
    CHECK(msg.find("x.json:3:") == 0);
    CHECK(msg.find("invalid JSON") != std::string::npos);
}

TEST_CASE("numbers too large for a double are invalid JSON, not a crash") {
    auto msg = config_error([] { parse_text(R"({"w": 1e999})", "w.json"); });
    CHECK(msg.find("w.json: invalid JSON: number overflow") == 0);
}

TEST_CASE("a missing file names the file and the reason") {
    auto msg = config_error([] { load_file("/nonexistent/dir/topo.json"); });
    CHECK(msg.find("/nonexistent/dir/topo.json: cannot open file") == 0);
}

TEST_CASE("a file is loaded and nodes carry their JSON path") {
    gossamer::test::TempDir dir;
    auto path = dir.write("t.json", R"({"graph": {"edges": [[0, 1], [1, "x"]]}})");
    Node root(load_file(path));
    Node bad = root.at("graph").at("edges")[1][1];
    CHECK(bad.path() == "graph.edges[1][1]");
    auto msg = config_error([&] { bad.as_int(); });
    CHECK(msg == path + ": graph.edges[1][1]: expected an integer, found the string \"x\"");
}

TEST_CASE("unknown keys are refused with a suggestion") {
    Node root(parse_text(R"({"peers": 3, "grpah": {}})", "t.json"));
    auto msg = config_error([&] { root.expect_object({"peers", "graph", "weights"}); });
    CHECK(msg.find("t.json: grpah: unknown key \"grpah\"; did you mean \"graph\"?") == 0);
}

TEST_CASE("typed reads check types and ranges") {
    Node root(parse_text(R"({"i": 5, "f": 2.5, "s": "ring", "b": true })", "t.json"));
    CHECK(root.at("i").as_int(0, 10) == 5);
    CHECK(root.at("f").as_double() == 2.5);
    CHECK(root.at("i").as_double() == 5.0);
    CHECK(root.at("s").as_string() == "ring");
    CHECK(root.at("b").as_bool());
    CHECK(config_error([&] { root.at("i").as_int(6, 10); }).find("out of range") !=
          std::string::npos);
    CHECK(config_error([&] {
              root.at("f").as_int();
          }).find("expected an integer, found a number") != std::string::npos);
    CHECK(config_error([&] { root.at("s").as_bool(); }).find("expected true or false") !=
          std::string::npos);
    CHECK(config_error([&] { root.at("nope"); }).find("missing key \"nope\"") != std::string::npos);
    CHECK(config_error([&] {
              root.at("s").as_enum({"torus", "rings"});
          }).find("did you mean \"rings\"") != std::string::npos);
}

TEST_CASE("arrays are indexed with bounds checks") {
    Node root(parse_text(R"({"a": [1, 2]})", "t.json"));
    CHECK(root.at("a").size() == 2);
    CHECK(root.at("a").elements().size() == 2);
    CHECK(config_error([&] { root.at("a")[2]; }).find("a: expected at least 3 elements") !=
          std::string::npos);
    CHECK(config_error([&] { root.at("a").expect_array(3); }).find("at least 3") !=
          std::string::npos);
}

TEST_CASE("edit distance and closest suggestions") {
    CHECK(edit_distance("kitten", "sitting") == 3);
    CHECK(edit_distance("", "abc") == 3);
    CHECK(closest("metropolis", {"uniform", "metropolis_hastings"}) == std::nullopt);
    CHECK(closest("unifrom", {"uniform", "metropolis_hastings"}) == std::string("uniform"));
}

TEST_CASE("a directory given as a JSON file is named as a directory") {
    gossamer::test::TempDir dir;
    auto msg = config_error([&] { load_file(dir.path().string()); });
    CHECK(msg.find(dir.path().string() + ": is a directory") == 0);
    CHECK_FALSE(contains(msg, "end of input"));
}

TEST_CASE("an empty file says it is empty") {
    gossamer::test::TempDir dir;
    auto path = dir.write("empty.json", " \n");
    auto msg = config_error([&] { load_file(path); });
    CHECK(msg.find(path + ": the file is empty") == 0);
}

TEST_CASE("duplicate keys are refused with the file, the JSON path and the key") {
    CHECK(config_error([] { parse_text(R"({"peers": 4, "peers": 8})", "t.json"); }) ==
          "t.json: peers: duplicate key \"peers\"; keep only one of the two (JSON objects "
          "take each key once)");
    auto msg = config_error([] {
        parse_text(R"({"graph": {"edges": [[0, 1], {"a": 1, "b": {"w": 1, "w": 2}}]}})", "t.json");
    });
    CHECK(msg.find("t.json: graph.edges[1].b.w: duplicate key \"w\"") == 0);
    // The same key in sibling objects is fine.
    Node ok(parse_text(R"({"a": [{"k": 1}, {"k": 2}], "b": {"k": 3}})", "t.json"));
    CHECK(ok.at("a")[1].at("k").as_int() == 2);
}
