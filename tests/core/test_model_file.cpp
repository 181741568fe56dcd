#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "gossamer/core/error.hpp"
#include "gossamer/core/model_file.hpp"
#include "support/temp_dir.hpp"

using namespace gossamer;

namespace {

PartitionLayout two_parts() { return PartitionLayout({{"fc1", 0, 6}, {"fc2", 6, 4}}, 10); }

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string config_error(const std::string& path) {
    try {
        load_model_file(path);
    } catch (const ConfigError& e) {
        return e.what();
    }
    FAIL("expected ConfigError");
    return {};
}

}  // namespace

TEST_CASE("a model file round-trips parameters, layout, step and description") {
    test::TempDir dir;
    const std::string path = (dir.path() / "m.bin").string();
    std::vector<float> x(10);
    for (int i = 0; i < 10; ++i) x[static_cast<std::size_t>(i)] = 0.5f * static_cast<float>(i) - 1.0f;
    save_model_file(path, "mlp 3-2", 77, two_parts(), x);
    auto f = load_model_file(path);
    CHECK(f.model == "mlp 3-2");
    CHECK(f.step == 77);
    CHECK(f.layout == two_parts());
    REQUIRE(f.params.size() == 10);
    for (std::size_t i = 0; i < 10; ++i) CHECK(f.params.span()[i] == x[i]);
    CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST_CASE("a model file is replaced whole") {
    test::TempDir dir;
    const std::string path = (dir.path() / "m.bin").string();
    std::vector<float> a(10, 1.0f), b(10, 2.0f);
    save_model_file(path, "m", 1, two_parts(), a);
    save_model_file(path, "m", 2, two_parts(), b);
    CHECK(load_model_file(path).params.span()[3] == 2.0f);
    // A failed write (no such folder) leaves nothing behind and throws.
    CHECK_THROWS_AS(save_model_file((dir.path() / "no/such/m.bin").string(), "m", 1, two_parts(), a),
                    Error);
    CHECK_THROWS_AS(save_model_file(path, "m", 1, two_parts(), std::vector<float>(9)), Error);
    CHECK(load_model_file(path).step == 2);
}

TEST_CASE("corrupt model files are refused with one clear line") {
    test::TempDir dir;
    const std::string path = (dir.path() / "m.bin").string();
    save_model_file(path, "m", 1, two_parts(), std::vector<float>(10, 0.25f));
    const std::string good = slurp(path);

    std::string flipped = good;
    flipped[good.size() - 10] ^= 0x40;  // a parameter byte
    CHECK(config_error(dir.write("flip.bin", flipped)).find("checksum mismatch") != std::string::npos);
    CHECK(config_error(dir.write("short.bin", good.substr(0, good.size() - 7))).find("truncated") !=
          std::string::npos);
    CHECK(config_error(dir.write("head.bin", good.substr(0, 20))).find("truncated") != std::string::npos);
    std::string magic = good;
    magic[0] = 'X';
    CHECK(config_error(dir.write("magic.bin", magic)).find("bad magic number") != std::string::npos);
    std::string version = good;
    version[8] = 9;
    CHECK(config_error(dir.write("version.bin", version)).find("version 9 is not supported") !=
          std::string::npos);
    CHECK(config_error(dir.write("extra.bin", good + "x")).find("trailing bytes") != std::string::npos);
    CHECK(config_error((dir.path() / "missing.bin").string()).find("cannot open model file") !=
          std::string::npos);
}
