// gossamer bench compute and mix: each measures our side and its reference in one run and divides.
#include <doctest/doctest.h>

#include <fstream>
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
    CHECK(row["ratio"].get<double>() ==
          doctest::Approx(row["gossamer_samples_per_s"].get<double>() / 1000));
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

TEST_CASE("bench mix reports mix and memcpy bandwidth and their ratio for each k") {
    TempDir dir;
    const std::string saved = (dir.path() / "mix.json").string();
    auto r = run(kBin + " bench mix --bytes 1MiB --neighbours 3 --repeats 2 --json --save '" +
                 saved + "'");
    REQUIRE(r.status == 0);
    auto j = nlohmann::json::parse(r.out);
    CHECK(j["bytes_per_buffer"] == 1 << 20);
    CHECK(j["statistic"] == "best");
    REQUIRE(j["rows"].size() == 3);
    for (int k = 1; k <= 3; ++k) {
        const auto& row = j["rows"][k - 1];
        CHECK(row["neighbours"] == k);
        const double mix = row["mix_gb_per_s"], copy = row["memcpy_gb_per_s"];
        CHECK(mix > 0);
        CHECK(copy > 0);
        CHECK(row["ratio"].get<double>() == doctest::Approx(mix / copy));
        CHECK(row["target_ratio"] == 0.8);
    }
    std::ifstream in(saved);
    CHECK(nlohmann::json::parse(in) == j);

    auto text = run(kBin + " bench mix --bytes 64KiB --neighbours 2 --repeats 1 --isa scalar");
    REQUIRE(text.status == 0);
    CHECK(text.out.find("scalar kernels") != std::string::npos);
    CHECK(text.out.find("memcpy [GB/s]") != std::string::npos);
    CHECK(run(kBin + " bench mix --isa sse9").status == 2);
    CHECK(run(kBin + " bench mix --stores sometimes").status == 2);
    CHECK(run(kBin + " bench mix --bytes lots").status == 2);
    CHECK(run(kBin + " bench mix --neighbours 0").status == 2);
}

TEST_CASE("bench transport divides by ucx_perftest's figures from the same run") {
    TempDir dir;
    // A stand-in ucx_perftest: the server returns at once, the client prints a Final: line with
    // 1000 MB/s (2^20 bytes) and 4 us overall.
    dir.write("perftest.sh",
              "#!/bin/sh\ncase \"$1\" in localhost) echo 'Final: 100 1.0 4.0 4.0 1000.0 "
              "1000.0 10 10';; esac\nexit 0\n");
    const auto fake = (dir.path() / "perftest.sh").string();
    REQUIRE(run("chmod +x '" + fake + "'").status == 0);
    auto r = run(kBin +
                 " bench transport --sizes 4KiB,1MiB --bytes-per-size 2MiB "
                 "--latency-iterations 50 --repeats 1 --json --perftest '" +
                 fake + "'");
    REQUIRE(r.status == 0);
    auto j = nlohmann::json::parse(r.out);
    REQUIRE(j["bandwidth"].size() == 2);
    const auto& row = j["bandwidth"][1];
    CHECK(row["bytes"] == 1 << 20);
    CHECK(row["reference_gb_per_s"].get<double>() == doctest::Approx(1000.0 * 1048576 / 1e9));
    CHECK(row["ratio"].get<double>() == doctest::Approx(row["gossamer_gb_per_s"].get<double>() /
                                                        row["reference_gb_per_s"].get<double>()));
    CHECK(row["target_ratio_min"] == 0.9);
    CHECK(j["latency"]["reference_us"] == 4.0);
    CHECK(j["latency"]["gossamer_us"].get<double>() > 0);
    CHECK(j["latency"]["target_ratio_max"] == 2.0);
}

TEST_CASE("bench transport refuses bad sizes and says when the reference is missing") {
    auto bad = run(kBin + " bench transport --sizes 3B");
    CHECK(bad.status == 2);
    CHECK(bad.err.find("--sizes: '3B'") != std::string::npos);
    auto missing = run(kBin +
                       " bench transport --sizes 4KiB --bytes-per-size 64KiB "
                       "--latency-iterations 20 --repeats 1 --perftest /nonexistent/pt");
    CHECK(missing.status == 1);
    CHECK(missing.out.find("reference not measured: /nonexistent/pt not found") !=
          std::string::npos);
}
