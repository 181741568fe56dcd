// Text data (core/text.hpp) and its training config: vocabulary, windows, the validation split,
// the KJV reader and every bad input.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "gossamer/core/error.hpp"
#include "gossamer/core/sharding.hpp"
#include "gossamer/core/text.hpp"
#include "support/errors.hpp"
#include "support/optional.hpp"
#include "support/temp_dir.hpp"

using namespace gossamer;
using gossamer::test::config_error;
using gossamer::test::contains;

TEST_CASE("text: vocabulary, encoding and decoding") {
    const std::string text = "abracadabra\n";
    const std::string v = vocabulary_of(text);
    CHECK(v == "\nabcdr");
    const auto ids = encode_text(text, v);
    REQUIRE(ids.size() == text.size());
    CHECK(ids[0] == 1);   // 'a'
    CHECK(ids[11] == 0);  // '\n'
    CHECK(decode_text(ids, v) == text);
    CHECK(vocabulary_digest(v).size() == 8);
    CHECK(vocabulary_digest(v) != vocabulary_digest("\nabcde"));
    CHECK(vocabulary_digest("123456789") == "cbf43926");  // the CRC-32 check value
    try {
        encode_text("abz", v);
        FAIL("expected an error");
    } catch (const Error& e) {
        CHECK(contains(e.what(), "'z' at position 2"));
    }
    CHECK_THROWS_AS(decode_text(std::vector<std::int32_t>{6}, v), Error);
}

TEST_CASE("text: windows of context + 1 at a stride, labelled by their last character") {
    const std::string text = "abcdefghij";
    const auto v = vocabulary_of(text);
    const auto d = text_windows(text, v, 3, 3, "t");
    CHECK(d.features == 4);
    CHECK(d.classes == 10);
    CHECK(d.vocabulary == v);
    REQUIRE(d.size() == 3);  // abcd, defg, ghij: every character but the first is a target once
    CHECK(d.x[4] == 3.0f);   // 'd'
    CHECK(d.labels[2] == 9);
    CHECK(text_windows(text, v, 3, 1, "t").size() == 7);
    CHECK_THROWS_AS(text_windows(text, v, 10, 1, "t"), Error);
    // subset() keeps the vocabulary: a peer's shard is still text.
    const auto shard = shard_for_peer(d, {.mode = ShardMode::contiguous, .peers = 3}, 1);
    CHECK(shard.vocabulary == v);
    CHECK(shard.x[0] == 3.0f);  // the second window in text order
}

TEST_CASE("text: contiguous sharding keeps the data's order, iid shuffles it") {
    const std::string text(1000, 'a');
    auto d = text_windows(text + "b", "ab", 4, 4, "t");
    const auto c = shard_indices(d, {.mode = ShardMode::contiguous, .peers = 4, .seed = 3});
    REQUIRE(c.size() == 4);
    CHECK(c[0].front() == 0);
    CHECK(c[1].front() == c[0].back() + 1);
    CHECK(c[3].back() == d.size() - 1);
    const auto i = shard_indices(d, {.mode = ShardMode::iid, .peers = 4, .seed = 3});
    CHECK(i[0].back() - i[0].front() > static_cast<std::int64_t>(i[0].size()));
}

TEST_CASE("text: bad text files are one line each") {
    test::TempDir dir;
    CHECK(contains(config_error([&] { read_text_file((dir.path() / "no").string(), "data.file"); }),
                   "no such file"));
    CHECK(contains(config_error([&] { read_text_file(dir.path().string(), "data.file"); }),
                   "not a regular file"));
    CHECK(contains(config_error([&] { read_text_file(dir.write("e.txt", ""), "data.file"); }),
                   "empty"));
    CHECK(contains(config_error([&] {
                       read_text_file(dir.write("b.bin", std::string("ab\0c", 4)), "data.file");
                   }),
                   "NUL byte at offset 2"));
    CHECK(read_text_file(dir.write("ok.txt", "hello\n"), "data.file") == "hello\n");
}

TEST_CASE("text: a reader that is missing, fails or prints no verses is one line") {
    test::TempDir dir;
    CHECK(contains(
        config_error([&] { read_bible_kjv("data.name", (dir.path() / "bible").string()); }),
        "not installed"));
    auto script = [&](const std::string& name, const std::string& body) {
        const auto p = dir.write(name, "#!/bin/sh\n" + body + "\n");
        std::filesystem::permissions(p, std::filesystem::perms::owner_all);
        return p;
    };
    CHECK(contains(config_error([&] { read_bible_kjv("data.name", script("f", "exit 3")); }),
                   "failed (status 3)"));
    CHECK(contains(
        config_error([&] { read_bible_kjv("data.name", script("g", "echo 'not a bible'")); }),
        "not a verse"));
    CHECK(contains(config_error([&] {
                       read_bible_kjv("data.name", script("h", "echo 'Ge1:1 In the beginning'"));
                   }),
                   "printed 1 verses"));
}

TEST_CASE("text: the KJV through Debian's reader") {
    if (!test::have_component("kjv", test::missing_kjv())) return;
    const std::string text = read_bible_kjv("data.name");
    CHECK(text.size() == 4'137'850);
    CHECK(text.rfind("In the beginning God created the heaven and the earth.\n", 0) == 0);
    CHECK(text.ends_with("The grace of our Lord Jesus Christ be with you all. Amen.\n"));
    CHECK(vocabulary_of(text).size() == 63);  // 62 printable characters and the newline
}
