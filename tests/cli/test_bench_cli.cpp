// gossamer bench compute: measures our side, runs the reference and divides.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "support/run.hpp"
#include "support/temp_dir.hpp"

using gossamer::test::run;
using gossamer::test::TempDir;

namespace {
const std::string kBin = GOSSAMER_BINARY;
}

TEST_CASE("bench compute divides by the reference measured in the same run") {
    TempDir dir;
    // A stand-in reference that reports 1000 samples/s, so the ratio is ours / 1000.
    dir.write("torch_ref.py",
              "import json, sys\nprint(json.dumps({'torch': 'fake', 'mlp': 1000.0}))\n");
    auto r = run("GOSSAMER_BENCH_DIR=" + dir.path().string() + " " + kBin +
                 " bench compute --models mlp --seconds 0.2 --json");
    REQUIRE(r.status == 0);
    auto j = nlohmann::json::parse(r.out);
    REQUIRE(j["rows"].size() == 1);
    const auto& row = j["rows"][0];
    CHECK(row["torch_samples_per_s"] == 1000.0);
    CHECK(row["gossamer_samples_per_s"].get<double>() > 0);
    CHECK(row["ratio"].get<double>() == doctest::Approx(row["gossamer_samples_per_s"].get<double>() / 1000));
    CHECK(row["target_ratio"] == 1.0);
}

TEST_CASE("bench compute says when the reference cannot run, and refuses unknown models") {
    TempDir dir;
    dir.write("torch_ref.py", "import sys\nprint('no torch here', file=sys.stderr)\nsys.exit(3)\n");
    auto r = run("GOSSAMER_BENCH_DIR=" + dir.path().string() + " " + kBin +
                 " bench compute --models mlp --seconds 0.1");
    CHECK(r.status == 1);
    CHECK(r.out.find("reference:") != std::string::npos);
    CHECK(r.out.find("no torch here") != std::string::npos);
    auto none = run(kBin + " bench compute --models mlp --seconds 0.1 --no-reference");
    CHECK(none.status == 0);
    auto bad = run(kBin + " bench compute --models resnet");
    CHECK(bad.status == 2);
    CHECK(bad.err.find("unknown model \"resnet\"") != std::string::npos);
    CHECK(run(kBin + " bench nope").status == 2);
}
