// gossamer bench compute and mix: each measures our side and its reference in one run and divides.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "support/optional.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

using gossamer::test::have_component;
using gossamer::test::missing_program;
using gossamer::test::run;
using gossamer::test::TempDir;

namespace {
const std::string kBin = GOSSAMER_BINARY;

#ifdef GOSSAMER_TEST_MPI_REF
constexpr bool kMpiRefBuilt = true;
#else
constexpr bool kMpiRefBuilt = false;
#endif

// The condition `bench allreduce` checks before it runs its reference: the program is built and
// mpirun is on PATH.
std::string mpi_missing() {
    if (!kMpiRefBuilt)
        return "the MPI reference program is not built (no MPI found at configure time, or "
               "GOSSAMER_BUILD_MPI_REF=OFF; scripts/deps.sh --bench installs OpenMPI)";
    return missing_program("mpirun", "scripts/deps.sh --bench installs openmpi-bin");
}
}  // namespace

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

TEST_CASE("bench compute runs the GPT rows at their own batch, beside the reference's") {
    TempDir dir;
    // The stand-in answers 1000 samples/s only when asked for gpt_tiny at batch 16.
    dir.write("torch_ref.py",
              "import json, sys\nm = sys.argv[sys.argv.index('--models') + 1]\n"
              "print(json.dumps({'torch': 'fake', 'gpt_tiny': 1000.0 if m == 'gpt_tiny:16' "
              "else 1.0}))\n");
    auto r = run("GOSSAMER_BENCH_DIR=" + dir.path().string() + " " + kBin +
                 " bench compute --models gpt_tiny --seconds 0.1 --json");
    REQUIRE(r.status == 0);
    auto j = nlohmann::json::parse(r.out);
    REQUIRE(j["rows"].size() == 1);
    const auto& row = j["rows"][0];
    CHECK(row["batch"] == 16);
    CHECK(row["description"] == "gpt L2 H4 W128 T64 vocab 63 (421183 parameters)");
    CHECK(row["torch_samples_per_s"] == 1000.0);
    CHECK(row["target_ratio"] == 0.8);
    auto lab =
        run(kBin + " bench compute --models gpt_lab --batch 2 --seconds 0.1 --no-reference --json");
    REQUIRE(lab.status == 0);
    const auto l = nlohmann::json::parse(lab.out)["rows"][0];
    CHECK(l["batch"] == 2);  // --batch overrides the model's own
    CHECK(l["gossamer_samples_per_s"].get<double>() > 0);
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
    // 1000 MB/s (2^20 bytes) and 4 us overall, or 2000 MB/s when eager is forced
    // (UCX_RNDV_THRESH=inf): the reference is the better of the two from 8 KiB on.
    dir.write("perftest.sh",
              "#!/bin/sh\nbw=1000.0; [ \"$UCX_RNDV_THRESH\" = inf ] && bw=2000.0\n"
              "case \"$1\" in localhost) echo \"Final: 100 1.0 4.0 4.0 $bw $bw 10 10\";; esac\n"
              "exit 0\n");
    const auto fake = (dir.path() / "perftest.sh").string();
    REQUIRE(run("chmod +x '" + fake + "'").status == 0);
    auto r = run(kBin +
                 " bench transport --sizes 4KiB,1MiB --bytes-per-size 2MiB "
                 "--latency-iterations 50 --repeats 1 --json --perftest '" +
                 fake + "'");
    REQUIRE(r.status == 0);
    auto j = nlohmann::json::parse(r.out);
    REQUIRE(j["bandwidth"].size() == 2);
    CHECK(j["bandwidth"][0]["reference_gb_per_s"].get<double>() ==
          doctest::Approx(1000.0 * 1048576 / 1e9));
    CHECK(j["bandwidth"][0]["reference_protocol"] == "ucx");
    const auto& row = j["bandwidth"][1];
    CHECK(row["bytes"] == 1 << 20);
    CHECK(row["reference_gb_per_s"].get<double>() == doctest::Approx(2000.0 * 1048576 / 1e9));
    CHECK(row["reference_protocol"] == "eager");
    CHECK(row["ratio"].get<double>() == doctest::Approx(row["gossamer_gb_per_s"].get<double>() /
                                                        row["reference_gb_per_s"].get<double>()));
    CHECK(row["target_ratio_min"] == 0.9);
    CHECK(j["latency"]["reference_us"] == 4.0);
    CHECK(j["latency"]["gossamer_us"].get<double>() > 0);
    CHECK(j["latency"]["target_ratio_max"] == 2.0);
}

TEST_CASE("bench transport runs the real ucx_perftest beside ours and divides") {
    if (!have_component("ucx-utils", missing_program("ucx_perftest",
                                                     "scripts/deps.sh --bench installs ucx-utils")))
        return;
    auto r = run(kBin +
                 " bench transport --sizes 64KiB --bytes-per-size 4MiB --latency-iterations 200 "
                 "--repeats 1 --json");
    REQUIRE_MESSAGE(r.status == 0, r.out << r.err);
    auto j = nlohmann::json::parse(r.out);
    REQUIRE(j["bandwidth"].size() == 1);
    const auto& row = j["bandwidth"][0];
    CHECK(row["reference_gb_per_s"].get<double>() > 0);
    CHECK(row["ratio"].get<double>() == doctest::Approx(row["gossamer_gb_per_s"].get<double>() /
                                                        row["reference_gb_per_s"].get<double>()));
    CHECK(j["latency"]["reference_us"].get<double>() > 0);
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

TEST_CASE("bench allreduce checks every sum, prints the table and writes JSON") {
    TempDir dir;
    const std::string json = (dir.path() / "ar.json").string();
    auto r = run(kBin +
                 " bench allreduce --procs 2 --sizes 64KiB --iters 3 --warmup 1 --timeout 30 "
                 "--no-reference --json '" +
                 json + "'");
    REQUIRE(r.status == 0);
    CHECK(r.out.find("ours[ms]") != std::string::npos);
    CHECK(r.out.find("64.00 KiB") != std::string::npos);
    std::ifstream in(json);
    const auto j = nlohmann::json::parse(in);
    REQUIRE(j["rows"].size() == 1);
    const auto& row = j["rows"][0];
    CHECK(row["procs"] == 2);
    CHECK(row["bytes"] == 65536);
    const double t = row["ours"]["median_s"];
    CHECK(t > 0);
    CHECK(row["ours"]["busbw_gb_per_s"].get<double>() == doctest::Approx(65536 / t / 1e9));
    CHECK(row["exchange"]["median_s"].get<double>() > 0);
    CHECK(row["target_ratio_max"] == 1.1);
    CHECK(j["reference_error"] == "not asked for (--no-reference)");
}

TEST_CASE("bench allreduce measures MPI_Allreduce in the same run and divides by it") {
    if (!have_component("mpi", mpi_missing())) return;
    TempDir dir;
    const std::string json = (dir.path() / "ar.json").string();
    auto r = run(kBin +
                 " bench allreduce --procs 2 --sizes 64KiB --iters 3 --warmup 1 --timeout 30 "
                 "--json '" +
                 json + "'");
    REQUIRE_MESSAGE(r.status == 0, r.err);
    std::ifstream in(json);
    const auto j = nlohmann::json::parse(in);
    REQUIRE_MESSAGE(!j.contains("reference_error"), j.dump());
    REQUIRE(j["rows"].size() == 1);
    const auto& row = j["rows"][0];
    const double t = row["ours"]["median_s"];
    const double best = std::min(row["mpi_default"]["median_s"].get<double>(),
                                 row["mpi_ring"]["median_s"].get<double>());
    CHECK(best > 0);
    CHECK(row["ratio"].get<double>() == doctest::Approx(t / best));
}

TEST_CASE("bench allreduce fails loudly on a wrong sum and names the dead or wrong rank") {
    auto wrong = run("GOSSAMER_BENCH_CORRUPT_RANK=1 " + kBin +
                     " bench allreduce --procs 2 --sizes 64KiB --iters 2 --warmup 0 "
                     "--no-reference --timeout 30");
    CHECK(wrong.status == 1);
    CHECK(wrong.err.find("WRONG RESULT") != std::string::npos);
    CHECK(wrong.out.find("ours[ms]") == std::string::npos);
    auto dead = run("GOSSAMER_BENCH_KILL_RANK=1 " + kBin +
                    " bench allreduce --procs 2 --sizes 64KiB --iters 2 --no-reference "
                    "--timeout 30");
    CHECK(dead.status == 1);
    CHECK(dead.err.find("rank 1 was killed by signal 9") != std::string::npos);
}

TEST_CASE("bench allreduce shows ours alone when mpirun is missing") {
    auto r = run(kBin +
                 " bench allreduce --procs 2 --sizes 16KiB --iters 2 --warmup 1 --timeout 30 "
                 "--mpirun /nonexistent/mpirun");
    REQUIRE(r.status == 0);
    // Without the reference program the binary says so before it looks for mpirun.
    const std::string why = kMpiRefBuilt ? "/nonexistent/mpirun is not on PATH"
                                         : "the MPI reference program was not built";
    CHECK_MESSAGE(r.out.find("MPI reference not run: " + why) != std::string::npos, r.out);
    CHECK(r.out.find("16.00 KiB") != std::string::npos);
}

TEST_CASE("bench allreduce and calibrate refuse bad input with one line and status 2") {
    for (const char* args :
         {"allreduce --procs 0", "allreduce --procs 2,x", "allreduce --sizes x",
          "allreduce --sizes 3B", "allreduce --iters 0", "allreduce --errors maybe", "calibrate",
          "calibrate --config /nonexistent/train.json"}) {
        auto r = run(kBin + " bench " + args);
        CHECK_MESSAGE(r.status == 2, args);
        CHECK_MESSAGE(std::count(r.err.begin(), r.err.end(), '\n') == 1, args << ": " << r.err);
    }
    TempDir dir;
    const auto bad = dir.write("bad.json", R"({"modle": {"name": "softmax"}})");
    auto r = run(kBin + " bench calibrate --config " + bad);
    CHECK(r.status == 2);
    CHECK(r.err.find("modle") != std::string::npos);
}

TEST_CASE("bench calibrate writes a cluster file that gossamer sim reads") {
    TempDir dir;
    const auto config = dir.write("train.json", R"({"seed": 3,
        "data": {"name": "logreg_synthetic", "samples": 800, "test_samples": 200, "features": 10, "seed": 5},
        "model": {"name": "softmax"}, "optimizer": {"name": "sgd", "lr": 0.2},
        "training": {"epochs": 1, "batch_size": 20}})");
    const auto topology =
        dir.write("ring2.json", R"({"peers": {"count": 2}, "graph": {"family": "ring"}})");
    const std::string cluster = (dir.path() / "cluster.json").string();
    auto r = run(kBin + " bench calibrate --config " + config + " --out '" + cluster +
                 "' --steps 5 --warmup 1 --link-bytes 256KiB --json");
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["step_time_median_s"].get<double>() > 0);
    CHECK(j["link_bandwidth_bytes_per_s"].get<double>() > 0);
    CHECK(j["link_latency_s"].get<double>() > 0);
    std::ifstream in(cluster);
    const auto c = nlohmann::json::parse(in);
    CHECK(c["defaults"]["base_time"] == j["step_time_median_s"]);
    CHECK(c["network"]["bandwidth"] == j["link_bandwidth_bytes_per_s"]);
    auto sim = run(kBin + " sim --topology " + topology + " --cluster '" + cluster + "' --config " +
                   config + " --algorithms allreduce --out " + (dir.path() / "sim").string());
    CHECK(sim.status == 0);
}

TEST_CASE("bench trace prices one recorded event against one metrics line of the same run") {
    const auto r = run(kBin + " bench trace --events 20000 --lines 500 --repeats 2 --json");
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    const double record = j["record_ns_per_event"], line = j["metrics_line_ns"];
    CHECK(record > 0);
    CHECK(line > 0);
    CHECK(j["ratio_record_to_metrics_line"].get<double>() == doctest::Approx(record / line));
    CHECK(j["events"] == 20000);
    CHECK(j["bytes_per_event"].get<double>() < 256);  // trace::kMaxEventBytes
    const auto bad = run(kBin + " bench trace --events 5");
    CHECK(bad.status == 2);
    CHECK(bad.err.find("--events") != std::string::npos);
}
