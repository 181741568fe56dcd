// Output folders are locked while a run uses them, and a folder that would be replaced but holds
// an input of the run is refused before anything is removed (issue 37; docs/operations/cli.md).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "gossamer/core/error.hpp"
#include "gossamer/core/file_io.hpp"
#include "gossamer/core/json.hpp"
#include "gossamer/core/output_dir.hpp"
#include "support/errors.hpp"
#include "support/temp_dir.hpp"

using gossamer::OutputUse;
using gossamer::test::config_error;
using gossamer::test::contains;
using gossamer::test::TempDir;
namespace fs = std::filesystem;

namespace {

// A lock held through a descriptor of its own: to flock, that is another process.
class OtherHolder {
  public:
    OtherHolder(const fs::path& dir, int op) {
        fd_ = ::open((dir / ".gossamer-output.lock").c_str(), O_RDWR | O_CREAT, 0644);
        REQUIRE(fd_ >= 0);
        REQUIRE(::flock(fd_, op | LOCK_NB) == 0);
        if (op == LOCK_EX) {
            REQUIRE(::ftruncate(fd_, 0) == 0);
            REQUIRE(::write(fd_, "gossamer sim (pid 42, since then)\n", 34) == 34);
        }
    }
    ~OtherHolder() { ::close(fd_); }

  private:
    int fd_ = -1;
};

const gossamer::OutputOrigin kOut{"", "--out"};

}  // namespace

TEST_CASE("output_dir: a folder another run holds is refused and nothing in it is touched") {
    TempDir dir;
    const auto out = dir.path() / "out";
    gossamer::prepare_output_dir(out, "gossamer train", kOut);
    gossamer::release_output_dir(out);
    { std::ofstream(out / "model.bin") << "first"; }
    {
        OtherHolder other(out, LOCK_EX);
        const auto msg =
            config_error([&] { gossamer::prepare_output_dir(out, "gossamer train", kOut); });
        CHECK(msg == "--out: the output folder " + out.string() +
                         " is in use by gossamer sim (pid 42, since then); wait for it to end, or "
                         "pick another --out");
        CHECK(gossamer::test::read_file(out / "model.bin") == "first");
        CHECK(contains(config_error([&] {
                           gossamer::prepare_output_dir(out, "gossamer peer", kOut,
                                                        OutputUse::share);
                       }),
                       "is in use by gossamer sim (pid 42"));
    }
    // Shared by the peers of a job: they share it, a replacing run is refused.
    {
        OtherHolder peer(out, LOCK_SH);
        gossamer::prepare_output_dir(out, "gossamer peer", kOut, OutputUse::share);
        gossamer::release_output_dir(out);
        CHECK(contains(
            config_error([&] { gossamer::prepare_output_dir(out, "gossamer train", kOut); }),
            "is in use by the running peers of a job"));
        CHECK(gossamer::test::read_file(out / "model.bin") == "first");
    }
    // Free again: replaced, the lock file kept (another run may be waiting on it).
    CHECK(gossamer::prepare_output_dir(out, "gossamer train", kOut).has_value());
    CHECK_FALSE(fs::exists(out / "model.bin"));
    CHECK(fs::exists(out / ".gossamer-output.lock"));
    // This process holds it now: another descriptor (another run) cannot take it.
    const int fd = ::open((out / ".gossamer-output.lock").c_str(), O_RDWR);
    CHECK(::flock(fd, LOCK_SH | LOCK_NB) != 0);
    ::close(fd);
    gossamer::release_output_dir(out);
}

TEST_CASE("output_dir: a refused folder is not locked and gets no lock file") {
    TempDir dir;
    { std::ofstream(dir.path() / "notes.txt") << "mine"; }
    CHECK(contains(
        config_error([&] { gossamer::prepare_output_dir(dir.path(), "gossamer train", kOut); }),
        "holds no .gossamer-output marker"));
    CHECK_FALSE(fs::exists(dir.path() / ".gossamer-output.lock"));
}

TEST_CASE(
    "output_dir: a folder holding an input of the run is refused before anything is removed") {
    TempDir dir;
    const auto out = dir.path() / "out";
    gossamer::prepare_output_dir(out, "gossamer launch", kOut);
    gossamer::release_output_dir(out);
    fs::create_directories(out / "async");
    const auto topology = (out / "async" / "topology.json").string();
    { std::ofstream(topology) << "{}"; }
    gossamer::forget_input_files();
    gossamer::json::load_file(topology);
    CHECK(config_error([&] { gossamer::prepare_output_dir(out, "gossamer launch", kOut); }) ==
          "--out: the output folder " + out.string() + " holds " + topology +
              ", an input of this run, which replacing the folder would delete; move the input "
              "out of the folder, or pick another --out");
    CHECK(fs::exists(topology));
    // Through another spelling of the folder too (a relative path with "..").
    const auto other = out / "async" / ".." / ".." / "out";
    CHECK(contains(
        config_error([&] { gossamer::prepare_output_dir(other, "gossamer launch", kOut); }),
        "an input of this run"));
    // Shared (the peers of a job) nothing is removed: no refusal.
    gossamer::prepare_output_dir(out, "gossamer peer", kOut, OutputUse::share);
    gossamer::release_output_dir(out);
    CHECK(fs::exists(topology));
    gossamer::forget_input_files();
    gossamer::prepare_output_dir(out, "gossamer launch", kOut);
    gossamer::release_output_dir(out);
    CHECK_FALSE(fs::exists(topology));
}
