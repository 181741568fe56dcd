#include <doctest/doctest.h>

#include "gossamer/core/log.hpp"

using namespace gossamer::log;

TEST_CASE("log levels parse and filter") {
    Level l{};
    CHECK(parse_level("DEBUG", l));
    CHECK(l == Level::debug);
    CHECK(parse_level("warning", l));
    CHECK(l == Level::warn);
    CHECK_FALSE(parse_level("loud", l));
    const Level saved = level();
    set_level(Level::warn);
    CHECK(enabled(Level::error));
    CHECK(enabled(Level::warn));
    CHECK_FALSE(enabled(Level::info));
    set_level(saved);
}
