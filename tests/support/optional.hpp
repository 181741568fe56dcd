#pragma once
// Optional components (docs/operations/testing.md). A test that needs one asks here, with the same
// condition the build or the program checks. When the component is absent the test prints "skipped
// (optional): COMPONENT: REASON", which ctest reports as a skip (never a pass), unless
// GOSSAMER_REQUIRE (a comma-separated list) names the component: then its absence fails the test.

#include <doctest/doctest.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>

namespace gossamer::test {

/// Whether GOSSAMER_REQUIRE names `component`.
inline bool component_required(std::string_view component) {
    const char* env = std::getenv("GOSSAMER_REQUIRE");
    std::string_view list = env ? env : "";
    while (!list.empty()) {
        const auto comma = list.find(',');
        if (list.substr(0, comma) == component) return true;
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
    }
    return false;
}

/// True when `missing` is empty (the component is here). Otherwise the calling test skips itself
/// (prints the skip line; return at once) or, when the component is required, fails.
inline bool have_component(std::string_view component, const std::string& missing) {
    if (missing.empty()) return true;
    if (component_required(component)) {
        FAIL_CHECK("required component " << component
                                         << " (GOSSAMER_REQUIRE) is missing: " << missing);
    } else {
        std::cout << "skipped (optional): " << component << ": " << missing << std::endl;
    }
    return false;
}

/// Empty when `program` is on PATH, else why not (naming the package that installs it).
inline std::string missing_program(const std::string& program, const std::string& package) {
    std::string check = "command -v '";
    check += program;
    check += "' >/dev/null 2>&1";
    if (std::system(check.c_str()) == 0) return {};
    std::string why = program;
    why += " is not on PATH (";
    why += package;
    why += ")";
    return why;
}

/// Empty when the KJV reader of bible-kjv (with bible-kjv-text's data) is installed.
inline std::string missing_kjv() {
    if (std::system("test -x /usr/bin/bible && test -r /usr/lib/bible.data") == 0) return {};
    return "/usr/bin/bible or /usr/lib/bible.data is missing (bible-kjv, bible-kjv-text: "
           "scripts/deps.sh)";
}

}  // namespace gossamer::test
