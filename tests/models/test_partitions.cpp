// The parameter vector and partition layouts: coverage, errors, equality, fingerprints, grouping.

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "gossamer/core/json.hpp"
#include "gossamer/core/models.hpp"
#include "gossamer/core/params.hpp"
#include "gossamer/core/partition.hpp"

using namespace gossamer;

TEST_CASE("ParamVector: 64-byte aligned, zeroed, deep copies, checked slices") {
    for (std::size_t n : {1u, 3u, 17u, 1000u}) {
        ParamVector v(n);
        CHECK(reinterpret_cast<std::uintptr_t>(v.data()) % 64 == 0);
        for (std::size_t i = 0; i < n; ++i) CHECK(v[i] == 0.0f);
    }
    ParamVector a(5);
    a.fill(2.0f);
    ParamVector b = a;
    b[0] = 3.0f;
    CHECK(a[0] == 2.0f);
    CHECK(reinterpret_cast<std::uintptr_t>(b.data()) % 64 == 0);
    ParamVector c = std::move(b);
    CHECK(c[0] == 3.0f);
    CHECK(b.empty());
    CHECK(a.slice(1, 4).size() == 4);
    CHECK_THROWS_AS(a.slice(2, 4), std::out_of_range);
    CHECK(ParamVector().data() == nullptr);
    std::span<float> s = a;
    CHECK(s.size() == 5);
}

namespace {

std::string problem(std::vector<Partition> parts, std::size_t total) {
    return partition_problem(parts, total).value_or("ok");
}

}  // namespace

TEST_CASE("partition_problem names overlaps, gaps, ranges past the end and bad names") {
    CHECK(problem({{"slow", 150, 150}, {"head", 0, 100}, {"fast", 100, 100}}, 300) ==
          "partitions 'fast' [100, 200) and 'slow' [150, 300) overlap; give each parameter to "
          "exactly one partition");
    CHECK(problem({{"a", 0, 100}, {"b", 120, 80}}, 200) ==
          "parameters [100, 120) belong to no partition (between 'a' and 'b'); give each "
          "parameter to exactly one partition");
    CHECK(problem({{"b", 10, 90}}, 100) ==
          "parameters [0, 10) belong to no partition (before 'b'); give each parameter to "
          "exactly one partition");
    CHECK(problem({{"a", 0, 90}}, 100) ==
          "parameters [90, 100) belong to no partition (after 'a'); give each parameter to "
          "exactly one partition");
    CHECK(problem({{"a", 0, 50}, {"b", 50, 60}}, 100) ==
          "partition 'b' [50, 110) ends past the 100 parameters of the model; keep every range "
          "inside [0, 100)");
    CHECK(problem({{"a", 0, 50}, {"", 50, 50}}, 100) ==
          "partition 1 [50, 100) has no name; name every partition");
    CHECK(problem({{"a", 0, 50}, {"a", 50, 50}}, 100) ==
          "two partitions are named 'a'; give each partition its own name");
    CHECK(problem({{"a", 0, 100}, {"e", 100, 0}}, 100) ==
          "partition 'e' is empty; give it at least one parameter or remove it");
    CHECK(problem({}, 10).find("[0, 10) belong to no partition") != std::string::npos);
    CHECK(problem({{"a", 0, SIZE_MAX}}, 10).find("ends past") != std::string::npos);
    CHECK(problem({{"b", 60, 40}, {"a", 0, 60}}, 100) == "ok");
    CHECK(problem({}, 0) == "ok");
}

TEST_CASE("partition_problem checks 200,000 partitions in well under a second, not n^2") {
    // A model file's layout is outside data: before, the duplicate-name check compared every
    // pair (2e10 comparisons here, minutes).
    std::vector<Partition> parts;
    const std::size_t n = 200'000;
    for (std::size_t i = 0; i < n; ++i) parts.push_back({fmt::format("p{}", i), i, 1});
    const auto start = std::chrono::steady_clock::now();
    CHECK(problem(parts, n) == "ok");
    parts.back().name = "p7";
    CHECK(problem(parts, n) == "two partitions are named 'p7'; give each partition its own name");
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
}

TEST_CASE("PartitionLayout: sorted, validated, comparable, with a stable fingerprint") {
    PartitionLayout layout({{"slow", 0, 100}, {"fast", 100, 20}}, 120);
    REQUIRE(layout.count() == 2);
    CHECK(layout[0].name == "slow");
    CHECK(layout.find("fast") == std::optional<std::size_t>(1));
    CHECK(!layout.find("medium"));
    CHECK(layout.owner(0) == 0);
    CHECK(layout.owner(99) == 0);
    CHECK(layout.owner(100) == 1);
    CHECK(layout.owner(119) == 1);
    CHECK_THROWS_AS(layout.owner(120), std::out_of_range);
    CHECK(layout.describe() == "slow [0, 100), fast [100, 120)");

    PartitionLayout same({{"fast", 100, 20}, {"slow", 0, 100}}, 120);
    PartitionLayout renamed({{"slow", 0, 100}, {"quick", 100, 20}}, 120);
    PartitionLayout moved({{"slow", 0, 99}, {"fast", 99, 21}}, 120);
    CHECK(layout == same);
    CHECK(layout.fingerprint() == same.fingerprint());
    CHECK(layout != renamed);
    CHECK(layout.fingerprint() != renamed.fingerprint());
    CHECK(layout != moved);
    CHECK(layout.fingerprint() != moved.fingerprint());
    // Pinned: peers built from other versions of this code must agree on the value.
    CHECK(layout.fingerprint() == 0xf9e86185c1f15ad0ull);

    CHECK_THROWS_WITH_AS(
        PartitionLayout({{"head", 0, 100}, {"fast", 100, 100}, {"slow", 150, 150}}, 300),
        doctest::Contains("overlap"), PartitionError);
    CHECK(PartitionLayout::whole(7).describe() == "all [0, 7)");
    CHECK(PartitionLayout().count() == 0);
}

TEST_CASE("group_layers builds partitions from layer names, \"*\" taking the rest") {
    auto m = models::mlp(10, {8, 6}, 3);  // fc1 [0, 88), fc2 [88, 142), fc3 [142, 163)
    const std::vector<LayerGroup> fast_slow = {{"fast", {"fc3"}}, {"slow", {"*"}}};
    auto layout = group_layers(m->layers(), fast_slow);
    CHECK(layout.describe() == "slow [0, 142), fast [142, 163)");
    CHECK(layout == PartitionLayout({{"slow", 0, 142}, {"fast", 142, 21}}, 163));
    CHECK(layout.total() == m->parameter_count());

    auto default_layout = m->default_partitions();
    CHECK(default_layout.describe() == "fc1 [0, 88), fc2 [88, 142), fc3 [142, 163)");

    auto fails = [&](std::vector<LayerGroup> groups, const char* text) {
        CAPTURE(text);
        CHECK_THROWS_WITH_AS(group_layers(m->layers(), groups), doctest::Contains(text),
                             PartitionError);
    };
    fails({{"fast", {"fc4"}}, {"slow", {"*"}}},
          "unknown layer \"fc4\"; did you mean \"fc1\"? the model's layers are fc1, fc2, fc3");
    fails({{"fast", {"fc3"}}, {"slow", {"fc1"}}}, "layers fc2 belong to no partition");
    fails({{"fast", {"fc3"}}, {"slow", {"fc3", "*"}}}, "layer \"fc3\" is already in partition");
    fails({{"mid", {"fc2"}}, {"outer", {"*"}}},
          "partition 'outer' would hold layers fc1 and fc3 but not fc2 between them");
    fails({{"a", {"*"}}, {"b", {"*"}}}, "\"*\" already stands for the remaining layers");
    fails({{"a", {}}, {"b", {"*"}}}, "partition 'a' names no layers");
    fails({{"a", {"fc1", "fc2", "fc3"}}, {"b", {"*"}}}, "partition 'b' gets no layers");
}

namespace {

PartitionLayout from_json(const Model& m, const std::string& text) {
    auto doc = json::parse_text(text, "train.json");
    return partitions_from_config(json::Node(doc).at("partitions"), m.layers());
}

}  // namespace

TEST_CASE("partitions_from_config reports ConfigErrors at the JSON path") {
    auto m = models::mlp(10, {8, 6}, 3);
    CHECK(from_json(*m, R"({"partitions": {"fast": ["fc3"], "slow": ["*"]}})") ==
          PartitionLayout({{"slow", 0, 142}, {"fast", 142, 21}}, 163));
    CHECK(from_json(*m, R"({"partitions": {"head": {"offset": 142, "size": 21},
                                           "body": ["*"]}})")
              .describe() == "body [0, 142), head [142, 163)");

    auto error = [&](const std::string& text, const std::string& path, const char* what) {
        CAPTURE(text);
        try {
            from_json(*m, text);
            FAIL("no error");
        } catch (const ConfigError& e) {
            CHECK(e.file() == "train.json");
            CHECK(e.path() == path);
            CHECK(std::string(e.what()).find(what) != std::string::npos);
        }
    };
    error(R"({"partitions": {"fast": ["fc9"], "slow": ["*"]}})", "partitions.fast[0]",
          "unknown layer \"fc9\"");
    error(R"({"partitions": {"fast": ["fc3"], "slow": ["fc1"]}})", "partitions",
          "layers fc2 belong to no partition");
    error(R"({"partitions": {"a": {"offset": 0, "size": 100}, "b": ["fc2", "fc3"]}})",
          "partitions.b", "partitions 'a' [0, 100) and 'b' [88, 163) overlap");
    error(R"({"partitions": {"a": {"offset": 0, "size": 80}, "b": {"offset": 88, "size": 75}}})",
          "partitions.b", "parameters [80, 88) belong to no partition");
    error(R"({"partitions": {"a": {"offset": 0, "size": 80}, "b": ["fc2", "fc3"]}})", "partitions",
          "layers fc1 belong to no partition");
    error(R"({"partitions": {"a": {"offset": 0, "size": 0}, "b": ["*"]}})", "partitions.a.size",
          "out of range");
    error(R"({"partitions": {"a": 3}})", "partitions.a", "expected an array of layer names");
    error(R"({"partitions": {}})", "partitions", "no partitions");
    error(R"({"partitions": {"a": [1]}})", "partitions.a[0]", "expected a string");
}
