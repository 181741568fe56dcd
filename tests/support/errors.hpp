#pragma once
// Helpers for tests of bad input: run something, expect a ConfigError, look at its one line.

#include <doctest/doctest.h>

#include <string>

#include "gossamer/core/error.hpp"

namespace gossamer::test {

/// Runs f, expects a ConfigError, and returns its message ("" after a failed check).
template <typename F>
std::string config_error(F&& f) {
    try {
        f();
    } catch (const ConfigError& e) {
        return e.what();
    }
    FAIL("expected a ConfigError");
    return {};
}

inline bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

}  // namespace gossamer::test
