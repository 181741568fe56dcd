// Inputs that are not regular files or are too large are refused with one line (and never
// block); every input read is remembered; a write that fails names the path and the cause
// (issue 37).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "gossamer/core/checkpoint_file.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/core/file_io.hpp"
#include "gossamer/core/json.hpp"
#include "gossamer/core/metrics.hpp"
#include "gossamer/core/model_file.hpp"
#include "support/errors.hpp"
#include "support/temp_dir.hpp"

using gossamer::test::config_error;
using gossamer::test::contains;
using gossamer::test::TempDir;
namespace fs = std::filesystem;

namespace {

// Opens the FIFO for writing now and then until `done`, so that a reader that (wrongly) waits
// for a writer wakes up and the test fails on its message instead of hanging.
class FifoUnblocker {
  public:
    explicit FifoUnblocker(std::string path)
        : path_(std::move(path)), thread_([this] {
              while (!done_) {
                  const int fd = ::open(path_.c_str(), O_WRONLY | O_NONBLOCK);
                  if (fd >= 0) ::close(fd);
                  std::this_thread::sleep_for(std::chrono::milliseconds(200));
              }
          }) {}
    ~FifoUnblocker() {
        done_ = true;
        thread_.join();
    }

  private:
    std::string path_;
    std::atomic<bool> done_{false};
    std::thread thread_;
};

}  // namespace

TEST_CASE("file_io: a FIFO is refused as a JSON, model and checkpoint input without blocking") {
    TempDir dir;
    const auto fifo = (dir.path() / "topology.json").string();
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    FifoUnblocker unblock(fifo);
    for (const auto& msg : {config_error([&] { gossamer::json::load_file(fifo); }),
                            config_error([&] { gossamer::load_model_file(fifo); }),
                            config_error([&] { gossamer::load_checkpoint_file(fifo); })}) {
        CAPTURE(msg);
        CHECK(msg.rfind(fifo + ": is a FIFO (named pipe), not a regular file; give a regular file",
                        0) == 0);
        CHECK(msg.find('\n') == std::string::npos);
    }
}

TEST_CASE("file_io: /dev/zero and a folder are refused as inputs, nothing is read") {
    CHECK(contains(config_error([] { gossamer::json::load_file("/dev/zero"); }),
                   "/dev/zero: is a character device, not a regular file"));
    CHECK(contains(config_error([] { gossamer::load_model_file("/dev/zero"); }),
                   "/dev/zero: is a character device, not a regular file"));
    TempDir dir;
    CHECK(contains(
        config_error([&] { gossamer::read_input_file(dir.path().string(), gossamer::kJsonInput); }),
        "is a folder, not a regular file; give the path of the file inside it"));
}

TEST_CASE("file_io: an input over its size bound names the bound, before it is read") {
    TempDir dir;
    const auto path = dir.write("t.json", "12345678901");
    const gossamer::InputKind kind{"test file", "test inputs", 10};
    CHECK(config_error([&] { gossamer::read_input_file(path, kind); }) ==
          path +
              ": the file is 11 B, more than the 10 B bound on test inputs; give a smaller "
              "file (docs/operations/errors.md, \"Files\")");
    CHECK(gossamer::read_input_file(dir.write("u.json", "1234567890"), kind) == "1234567890");
    // A sparse JSON file of 300 MiB is refused from its size alone.
    const auto big = dir.path() / "big.json";
    { std::ofstream(big) << "{}"; }
    fs::resize_file(big, std::uint64_t{300} << 20);
    CHECK(contains(config_error([&] { gossamer::json::load_file(big.string()); }),
                   ": the file is 300.00 MiB, more than the 256.00 MiB bound on JSON inputs "
                   "(topology, cluster file, training config)"));
}

TEST_CASE("file_io: every input read is remembered, once") {
    gossamer::forget_input_files();
    TempDir dir;
    const auto a = dir.write("a.json", "{}");
    gossamer::json::load_file(a);
    gossamer::json::load_file(a);
    REQUIRE(gossamer::input_files().size() == 1);
    CHECK(gossamer::input_files()[0] == a);
    gossamer::forget_input_files();
    CHECK(gossamer::input_files().empty());
}

TEST_CASE("file_io: a write that fails is an IoError naming the path and the cause") {
    gossamer::MetricsWriter m("/dev/full");
    try {
        m.write({{"step", 1}});
        FAIL("expected an IoError");
    } catch (const gossamer::IoError& e) {
        CHECK(std::string(e.what()) == "/dev/full: cannot write metrics: No space left on device");
    }
    TempDir dir;
    const auto path = (dir.path() / "no" / "model.bin").string();
    try {
        gossamer::write_file_atomically(path, "x", "model file");
        FAIL("expected an IoError");
    } catch (const gossamer::IoError& e) {
        CHECK(std::string(e.what()) ==
              path + ": cannot create the model file: No such file or directory");
    }
    CHECK_FALSE(fs::exists(path + ".tmp"));
}
