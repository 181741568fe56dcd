#include <doctest/doctest.h>

#include "gossamer/core/units.hpp"

TEST_CASE("byte sizes parse with decimal and binary suffixes") {
    using gossamer::parse_bytes;
    CHECK(parse_bytes("4096") == 4096u);
    CHECK(parse_bytes("4MiB") == 4u << 20);
    CHECK(parse_bytes("100MB") == 100000000u);
    CHECK(parse_bytes("2gib") == 2ull << 30);
    CHECK(parse_bytes("12B") == 12u);
    CHECK_FALSE(parse_bytes("").has_value());
    CHECK_FALSE(parse_bytes("MiB").has_value());
    CHECK_FALSE(parse_bytes("4 MiB").has_value());
    CHECK_FALSE(parse_bytes("-4").has_value());
    CHECK_FALSE(parse_bytes("99999999999999999999").has_value());
}

TEST_CASE("byte sizes format for tables") {
    CHECK(gossamer::format_bytes(512) == "512 B");
    CHECK(gossamer::format_bytes(4 << 20) == "4.00 MiB");
}
