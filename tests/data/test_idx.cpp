#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "gossamer/core/error.hpp"
#include "gossamer/core/idx.hpp"
#include "idx_writer.hpp"
#include "support/errors.hpp"
#include "support/temp_dir.hpp"

using gossamer::ConfigError;
using gossamer::read_idx;
using namespace gossamer::test;

namespace {

std::vector<unsigned char> counting(std::size_t n) {
    std::vector<unsigned char> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<unsigned char>(i * 7 % 256);
    return v;
}

}  // namespace

TEST_CASE("read_idx parses a gzipped uint8 tensor: dimensions and row-major values") {
    TempDir dir;
    const auto path = (dir.path() / "t.idx.gz").string();
    const auto values = counting(2 * 3 * 4);
    write_gz(path, idx_bytes({2, 3, 4}, values));
    const auto t = read_idx(path);
    CHECK(t.dims == std::vector<std::int64_t>{2, 3, 4});
    CHECK(t.data == values);
}

TEST_CASE("read_idx reads uncompressed files too, and large dimensions in big-endian order") {
    TempDir dir;
    const auto path = (dir.path() / "t.idx").string();
    const auto values = counting(300);
    write_plain(path, idx_bytes({300}, values));
    const auto t = read_idx(path);
    CHECK(t.dims == std::vector<std::int64_t>{300});
    CHECK(t.data == values);
}

TEST_CASE("a bad magic number names the file and says it is not an IDX file") {
    TempDir dir;
    const auto path = (dir.path() / "bad.gz").string();
    auto bytes = idx_bytes({4}, counting(4));
    bytes[0] = 0x1F;
    write_gz(path, bytes);
    const auto msg = config_error([&] { read_idx(path); });
    CHECK(msg.find(path + ": bad magic number 0x1F000801") == 0);
}

TEST_CASE("an element type other than uint8 is refused by name") {
    TempDir dir;
    const auto path = (dir.path() / "ints.gz").string();
    write_gz(path, idx_bytes({1}, {0, 0, 0, 1}, 0x0C));
    const auto msg = config_error([&] { read_idx(path); });
    CHECK(msg.find(path + ": IDX element type int32 is not supported") == 0);
}

TEST_CASE("truncated data says how many bytes were announced and found") {
    TempDir dir;
    const auto path = (dir.path() / "short.gz").string();
    write_gz(path, idx_bytes({2, 3, 3}, counting(10)));
    const auto msg = config_error([&] { read_idx(path); });
    CHECK(msg.find(path + ": truncated data: header says 2 x 3 x 3 (18 bytes), file holds 10") ==
          0);
}

TEST_CASE("a header cut short is reported as truncated") {
    TempDir dir;
    const auto path = (dir.path() / "head.gz").string();
    auto bytes = idx_bytes({5, 5, 5}, {});
    bytes.resize(9);  // magic + first dimension + one byte of the second
    write_gz(path, bytes);
    const auto msg = config_error([&] { read_idx(path); });
    CHECK(msg.find(path + ": truncated header: 3 dimensions announced, file ends after 1") == 0);
    write_gz(path, {0, 0});
    CHECK(contains(config_error([&] { read_idx(path); }), "truncated header: 2 of 4"));
}

TEST_CASE("a gzip stream cut in the middle is a corrupt-file error, not a short tensor") {
    TempDir dir;
    const auto whole = (dir.path() / "whole.gz").string();
    write_gz(whole, idx_bytes({50, 50}, counting(2500)));
    std::ifstream in(whole, std::ios::binary);
    std::vector<unsigned char> gz((std::istreambuf_iterator<char>(in)), {});
    gz.resize(gz.size() / 2);
    const auto path = (dir.path() / "cut.gz").string();
    write_plain(path, gz);
    const auto msg = config_error([&] { read_idx(path); });
    CHECK(msg.find(path + ": ") == 0);
    CHECK((contains(msg, "corrupt or truncated gzip") || contains(msg, "truncated data")));
}

TEST_CASE("bytes after the announced data are refused") {
    TempDir dir;
    const auto path = (dir.path() / "long.gz").string();
    write_gz(path, idx_bytes({2, 2}, counting(5)));
    const auto msg = config_error([&] { read_idx(path); });
    CHECK(msg.find(path + ": unexpected bytes after the 4 values") == 0);
}

TEST_CASE("a missing file is named") {
    const auto msg = config_error([] { read_idx("/nonexistent/gossamer/x.gz"); });
    CHECK(msg.find("/nonexistent/gossamer/x.gz: file not found") == 0);
}

TEST_CASE("ConfigError from read_idx carries the file separately") {
    try {
        read_idx("/nonexistent/gossamer/y.gz");
        FAIL("expected a ConfigError");
    } catch (const ConfigError& e) {
        CHECK(e.file() == "/nonexistent/gossamer/y.gz");
        CHECK(e.path().empty());
    }
}
