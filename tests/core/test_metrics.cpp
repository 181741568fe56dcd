#include <doctest/doctest.h>

#include "gossamer/core/error.hpp"
#include "gossamer/core/metrics.hpp"
#include "support/temp_dir.hpp"

TEST_CASE("metrics are written as whole JSON lines and read back") {
    gossamer::test::TempDir dir;
    const std::string path = (dir.path() / "sub/folder/metrics.jsonl").string();
    {
        gossamer::MetricsWriter w(path);
        w.write({{"step", 1}, {"loss", 0.5}});
        w.write({{"step", 2}, {"loss", 0.25}});
        // Flushed per line: readable before the writer closes.
        auto lines = gossamer::read_json_lines(path);
        REQUIRE(lines.size() == 2);
        CHECK(lines[1]["loss"] == 0.25);
    }
    CHECK(gossamer::read_json_lines(path)[0]["step"] == 1);
}

TEST_CASE("an unwritable metrics path is a ConfigError naming it") {
    CHECK_THROWS_WITH_AS(
        gossamer::MetricsWriter("/proc/gossamer/metrics.jsonl"),
        doctest::Contains("/proc/gossamer/metrics.jsonl: cannot create metrics file"),
        gossamer::ConfigError);
    gossamer::test::TempDir dir;
    auto bad = dir.write("bad.jsonl", "{\"a\": 1}\nnot json\n");
    CHECK_THROWS_WITH_AS(gossamer::read_json_lines(bad), doctest::Contains("bad.jsonl:2"),
                         gossamer::ConfigError);
}
