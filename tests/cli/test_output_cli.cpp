// Outputs that never lie, inputs that are never destroyed (issue 37): an output folder in use is
// locked, an input inside the folder a run would replace is refused, a full disk is one line and
// exit 2 with no output that looks complete, and inputs that are not regular files are refused.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "gossamer/core/output_dir.hpp"
#include "launch_job.hpp"
#include "support/optional.hpp"
#include "support/small_fs.hpp"

using gossamer::test::kBin;
using gossamer::test::LaunchJob;
using gossamer::test::run;
using gossamer::test::RunResult;
namespace fs = std::filesystem;

namespace {

// One line on stderr, starting "error: ", exit 2, saying `says`.
void check_one_line(const RunResult& r, const std::string& says) {
    CAPTURE(r.err);
    CHECK(r.status == 2);
    CHECK(r.err.rfind("error: ", 0) == 0);
    CHECK(r.err.find(says) != std::string::npos);
    CHECK(r.err.find('\n') == r.err.size() - 1);
    CHECK(r.err.find("internal") == std::string::npos);
}

// The input files of a command: the job's, or others in their place.
struct Inputs {
    std::string topology, config, cluster;
    Inputs(const LaunchJob& job)
        : topology(job.topology), config(job.config), cluster(job.cluster) {}
};

std::string train(const Inputs& in, const std::string& extra) {
    return kBin + " train --config " + in.config + " " + extra;
}

std::string sim(const Inputs& in, const std::string& extra) {
    return kBin + " sim --topology " + in.topology + " --cluster " + in.cluster + " --config " +
           in.config + " " + extra;
}

std::string launch(const Inputs& in, const std::string& extra) {
    return kBin + " launch --no-plots --inproc --algorithms dpsgd --topology " + in.topology +
           " --config " + in.config + " --cluster " + in.cluster + " " + extra;
}

// The last line on stderr (progress lines may come before it) is the one error line, exit 2.
void check_last_line(const RunResult& r, const std::string& says) {
    CAPTURE(r.err);
    CHECK(r.status == 2);
    const auto start = r.err.rfind('\n', r.err.size() - 2);
    const std::string last = r.err.substr(start == std::string::npos ? 0 : start + 1);
    CHECK(last.rfind("error: ", 0) == 0);
    CHECK(last.find(says) != std::string::npos);
    CHECK(r.err.find("internal") == std::string::npos);
}

}  // namespace

TEST_CASE("output: train, sim and launch refuse an --out another process holds and touch nothing") {
    LaunchJob job;
    const auto out = job.dir.path() / "out";
    gossamer::prepare_output_dir(out, "gossamer test", {"", "--out"});  // this process holds it
    job.dir.write("out/model.bin", "the first run's");
    const std::string holder = "error: --out: the output folder " + out.string() +
                               " is in use by gossamer test (pid " + std::to_string(::getpid()) +
                               ", since ";
    for (const auto& command :
         {train(job, "--out " + out.string()), sim(job, "--out " + out.string()),
          launch(job, "--out " + out.string())}) {
        CAPTURE(command);
        const auto r = run(command);
        check_one_line(r, "; wait for it to end, or pick another --out");
        CHECK(r.err.rfind(holder, 0) == 0);
        CHECK(gossamer::test::read_file(out / "model.bin") == "the first run's");
        CHECK(r.out.empty());
    }
    gossamer::release_output_dir(out);
    CHECK(run(train(job, "--out " + out.string())).status == 0);
}

TEST_CASE("output: a second train into the --out of a running train is refused, until it dies") {
    LaunchJob job;
    const auto out = (job.dir.path() / "out").string();
    // The first run trains for a long time; the second comes while it does.
    const auto started =
        run(train(job, "--epochs 100000 --out " + out) + " >/dev/null 2>&1 & echo $!");
    const int pid = std::stoi(started.out);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!fs::exists(out + "/metrics.jsonl") && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    REQUIRE(fs::exists(out + "/metrics.jsonl"));
    const auto second = run(train(job, "--out " + out));
    check_one_line(second, "is in use by gossamer train (pid " + std::to_string(pid) + ", since ");
    CHECK(fs::exists(out + "/metrics.jsonl"));  // the first run's
    // kill -9: the kernel drops the lock with the process.
    run("kill -9 " + std::to_string(pid));
    while (run("kill -0 " + std::to_string(pid) + " 2>/dev/null").status == 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const auto third = run(train(job, "--out " + out));
    CAPTURE(third.err);
    CHECK(third.status == 0);
}

TEST_CASE("output: an input inside the --out a run would replace is refused before anything goes") {
    LaunchJob job;
    const auto out = job.dir.path() / "out";
    REQUIRE(run(launch(job, "--out " + out.string())).status == 0);
    const auto topology = out / "dpsgd" / "topology.json";
    fs::copy_file(job.topology, topology);
    const auto config = out / "x.json";
    fs::copy_file(job.config, config);
    const auto says = [&](const fs::path& input) {
        return "error: --out: the output folder " + out.string() + " holds " + input.string() +
               ", an input of this run, which replacing the folder would delete; move the input "
               "out of the folder, or pick another --out\n";
    };
    Inputs inside(job);
    inside.topology = topology.string();
    auto r = run(launch(inside, "--out " + out.string()));
    check_one_line(r, "an input of this run");
    CHECK(r.err == says(topology));
    r = run(sim(inside, "--out " + out.string()));
    CHECK(r.err == says(topology));
    CHECK(r.status == 2);
    r = run(kBin + " train --config " + config.string() + " --out " + out.string());
    CHECK(r.err == says(config));
    CHECK(r.status == 2);
    CHECK(fs::exists(topology));
    CHECK(fs::exists(config));
    CHECK(fs::exists(out / "dpsgd" / "result.json"));  // nothing removed
}

TEST_CASE("output: a FIFO, /dev/zero or a folder as an input is one line and exit 2 at once") {
    LaunchJob job;
    const auto fifo = (job.dir.path() / "input.json").string();
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    const auto out = (job.dir.path() / "out").string();
    // `timeout`: a reader that waits for a writer fails the test (124) instead of hanging it.
    const std::string t = "timeout 30 ";
    check_one_line(run(t + kBin + " topo validate " + fifo),
                   fifo + ": is a FIFO (named pipe), not a regular file");
    check_one_line(run(t + kBin + " topo validate /dev/zero"),
                   "/dev/zero: is a character device, not a regular file");
    check_one_line(run(t + kBin + " train --config " + fifo + " --out " + out), "is a FIFO");
    Inputs bad(job);
    bad.cluster = "/dev/zero";
    check_one_line(run(t + sim(bad, "--out " + out)), "/dev/zero: is a character device");
    bad = Inputs(job);
    bad.topology = fifo;
    check_one_line(run(t + launch(bad, "--out " + out)), "is a FIFO");
    check_one_line(run(t + kBin + " eval --model " + fifo + " --config " + job.config),
                   "is a FIFO");
    CHECK_FALSE(fs::exists(out));
    // A size bound names itself: a (sparse) topology of 300 MiB is refused from its size.
    const auto big = job.dir.path() / "big.json";
    { std::ofstream(big) << "{}"; }
    fs::resize_file(big, std::uint64_t{300} << 20);
    check_one_line(run(t + kBin + " topo validate " + big.string()),
                   "the file is 300.00 MiB, more than the 256.00 MiB bound on JSON inputs");
}

// The full-disk cases: $FS is a tmpfs of 160 KiB that a filler leaves 12 KiB of; the run's
// output goes there. After the run, a copy of what it left is kept outside the tmpfs.
struct FullDisk {
    LaunchJob job;
    RunResult r;
    fs::path left;  ///< the copy of OUT
    std::string err;
    explicit FullDisk(const std::function<std::string(const LaunchJob&)>& command) {
        left = job.dir.path() / "left";
        const auto err_path = job.dir.path() / "stderr";
        r = gossamer::test::run_on_small_fs(job.dir, 160, 148,
                                            command(job) + " 2>" + err_path.string() +
                                                "; rc=$?; cp -r \"$FS/out\" " + left.string() +
                                                " 2>/dev/null; exit $rc");
        err = gossamer::test::read_file(err_path);
    }
};

bool have_small_fs() {
    return gossamer::test::have_component("tmpfs", gossamer::test::missing_small_fs());
}

TEST_CASE("output: train on a full disk is one line naming the path and the cause, exit 2") {
    if (!have_small_fs()) return;
    FullDisk d([](const LaunchJob& job) { return train(job, "--epochs 40 --out \"$FS/out\""); });
    RunResult r{d.r.status, d.r.out, d.err};
    check_last_line(r, ": No space left on device");
    CHECK(d.err.find("/out/") != std::string::npos);
    // What is left is whole: metrics lines that parse, a model file that loads.
    std::ifstream in(d.left / "metrics.jsonl");
    for (std::string line; std::getline(in, line);) CHECK_NOTHROW(nlohmann::json::parse(line));
    CHECK_FALSE(fs::exists(d.left / "model.bin.tmp"));
}

TEST_CASE("output: sim on a full disk is one line, exit 2, and leaves no half-written run") {
    if (!have_small_fs()) return;
    FullDisk d([](const LaunchJob& job) {
        return sim(job, "--algorithms dpsgd,allreduce,sgp --seeds 3 --out \"$FS/out\"");
    });
    RunResult r{d.r.status, d.r.out, d.err};
    check_last_line(r, ": No space left on device");
    CHECK(d.r.out.empty());  // no table that looks like the whole result
    for (const auto& e : fs::recursive_directory_iterator(d.left)) {
        CAPTURE(e.path());
        CHECK(e.path().string().find(".partial") == std::string::npos);
        if (e.path().filename().string().rfind("seed", 0) == 0)
            CHECK(fs::exists(e.path() / "peers.jsonl"));
    }
}

TEST_CASE("output: launch on a full disk is one line, exit 2, no empty result.json, no table") {
    if (!have_small_fs()) return;
    FullDisk d([](const LaunchJob& job) {
        return kBin + " launch --no-plots --inproc --algorithms dpsgd,allreduce --topology " +
               job.topology + " --config " + job.config + " --cluster " + job.cluster +
               " --out \"$FS/out\"";
    });
    RunResult r{d.r.status, d.r.out, d.err};
    check_last_line(r, ": No space left on device");
    CHECK(d.r.out.find("lost") == std::string::npos);
    for (const auto& e : fs::recursive_directory_iterator(d.left))
        if (e.path().filename() == "result.json") CHECK(fs::file_size(e.path()) > 0);
}
