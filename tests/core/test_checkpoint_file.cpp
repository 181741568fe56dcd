// The checkpoint file (docs/operations/checkpoint.md): it round-trips its header and state; a
// truncated, corrupt or foreign file is refused with one ConfigError naming it; a write never
// tears.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "gossamer/core/checkpoint_file.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/core/rng.hpp"
#include "gossamer/core/state_io.hpp"
#include "support/temp_dir.hpp"

using namespace gossamer;

namespace {

CheckpointHeader header() {
    CheckpointHeader h;
    h.job_id = 42;
    h.algorithm = "dpsgd";
    h.rank = 2;
    h.n = 4;
    h.step = 100;
    h.model = "mlp 4-6-2 (44 parameters)";
    h.layout = PartitionLayout({{"fc1", 0, 30}, {"fc2", 30, 14}}, 44);
    h.settings = 0x1234;
    return h;
}

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string refusal(std::string_view bytes) {
    try {
        parse_checkpoint_file("ckpt.state", bytes);
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("a checkpoint round-trips its header and state, atomically") {
    test::TempDir dir;
    const std::string path = (dir.path() / "c.state").string();
    const std::vector<char> state = {'a', 'b', '\0', 'c'};
    save_checkpoint_file(path, header(), state);
    CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
    const auto f = load_checkpoint_file(path);
    CHECK(checkpoint_mismatch(f.header, header()) == "");
    CHECK(f.header.step == 100);
    CHECK(f.header.rank == 2);
    CHECK(f.state == state);
    // Another job, algorithm, peer count, rank, model, layout or settings: named.
    auto other = header();
    other.job_id = 7;
    CHECK(checkpoint_mismatch(f.header, other) == "job id: checkpoint 42, job 7");
    other = header();
    other.layout = PartitionLayout({{"all", 0, 44}}, 44);
    CHECK(checkpoint_mismatch(f.header, other).rfind("layout: checkpoint", 0) == 0);
    other = header();
    other.settings = 1;
    CHECK(checkpoint_mismatch(f.header, other).rfind("settings digest", 0) == 0);
    other = header();
    other.step = 5;  // the step is the resume's choice, not the job's
    CHECK(checkpoint_mismatch(f.header, other) == "");
}

TEST_CASE("a truncated, corrupt or foreign checkpoint is one ConfigError naming the file") {
    test::TempDir dir;
    const std::string path = (dir.path() / "c.state").string();
    save_checkpoint_file(path, header(), std::vector<char>(64, 'x'));
    const std::string good = slurp(path);
    CHECK(refusal(good) == "");
    // Cut anywhere: refused, never read past the end.
    for (std::size_t n = 0; n < good.size(); ++n) {
        CAPTURE(n);
        const auto why = refusal(std::string_view(good).substr(0, n));
        CHECK(why.rfind("ckpt.state", 0) == 0);
    }
    // Any single bit flipped: the checksum (or the magic number) catches it.
    Rng rng(9);
    for (int k = 0; k < 200; ++k) {
        std::string bad = good;
        bad[rng.below(bad.size())] ^= static_cast<char>(1 << rng.below(8));
        CHECK(refusal(bad).rfind("ckpt.state", 0) == 0);
    }
    CHECK(refusal(good + "x").find("checksum") != std::string::npos);
    CHECK(refusal("GSMRMODL").find("not a Gossamer checkpoint") != std::string::npos);
    // A folder, a missing file.
    try {
        load_checkpoint_file(dir.path().string());
        FAIL("a folder loaded");
    } catch (const ConfigError& e) {
        CHECK(std::string(e.what()).find("is a folder") != std::string::npos);
    }
    CHECK_THROWS_AS(load_checkpoint_file(path + ".missing"), ConfigError);
}

TEST_CASE("state readers refuse a short or oversized state with one ConfigError") {
    StateWriter w;
    w.tag("worker");
    w.i64(3);
    w.floats(std::vector<float>{1, 2, 3});
    const std::string bytes(w.bytes().begin(), w.bytes().end());
    {
        StateReader r("s", bytes);
        r.tag("worker");
        CHECK(r.i64("steps") == 3);
        std::vector<float> x(3);
        r.floats_into("x", x);
        CHECK(x[2] == 3);
        r.finish();
    }
    {
        StateReader r("s", bytes);
        CHECK_THROWS_WITH_AS(r.tag("dpsgd"), doctest::Contains("section 'worker' where 'dpsgd'"),
                             ConfigError);
    }
    {
        StateReader r("s", bytes);
        r.tag("worker");
        r.i64("steps");
        std::vector<float> x(4);  // another model size
        CHECK_THROWS_WITH_AS(r.floats_into("x", x), doctest::Contains("x holds 3 values"),
                             ConfigError);
    }
    {
        StateReader r("s", std::string_view(bytes).substr(0, bytes.size() - 1));
        r.tag("worker");
        r.i64("steps");
        CHECK_THROWS_WITH_AS(r.floats("x"),
                             doctest::Contains("truncated checkpoint state (while reading x)"),
                             ConfigError);
    }
    {
        StateReader r("s", bytes);
        r.tag("worker");
        CHECK_THROWS_WITH_AS(r.finish(), doctest::Contains("left over"), ConfigError);
    }
}
