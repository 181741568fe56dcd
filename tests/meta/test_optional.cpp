// Optional components: an absent one is a skip with its reason, or a failure where
// GOSSAMER_REQUIRE names it (support/optional.hpp, support/skip.sh).
#include <doctest/doctest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "support/optional.hpp"
#include "support/run.hpp"

using gossamer::test::component_required;
using gossamer::test::missing_program;
using gossamer::test::run;

namespace {

// GOSSAMER_REQUIRE for one scope.
struct RequireScope {
    std::optional<std::string> old;
    explicit RequireScope(const char* value) {
        if (const char* v = std::getenv("GOSSAMER_REQUIRE")) old = v;
        setenv("GOSSAMER_REQUIRE", value, 1);
    }
    ~RequireScope() {
        if (old)
            setenv("GOSSAMER_REQUIRE", old->c_str(), 1);
        else
            unsetenv("GOSSAMER_REQUIRE");
    }
};

const std::string kSkip = std::string("sh '") + GOSSAMER_SKIP_SCRIPT + "' ";

}  // namespace

TEST_CASE("GOSSAMER_REQUIRE is a comma-separated list of whole component names") {
    const RequireScope scope("mpi,python");
    CHECK(component_required("mpi"));
    CHECK(component_required("python"));
    CHECK_FALSE(component_required("py"));
    CHECK_FALSE(component_required("cuda-build"));
    const RequireScope none("");
    CHECK_FALSE(component_required("mpi"));
}

TEST_CASE("a missing program is named with the package that installs it") {
    CHECK(missing_program("sh", "base").empty());
    CHECK(missing_program("/nonexistent/prog", "apt-get install nothing") ==
          "/nonexistent/prog is not on PATH (apt-get install nothing)");
}

TEST_CASE("skip.sh skips with the reason, and fails when the component is required") {
    auto skipped = run("env -u GOSSAMER_REQUIRE " + kSkip + "mpi 'no MPI here'");
    CHECK(skipped.status == 77);
    CHECK(skipped.out == "skipped (optional): mpi: no MPI here\n");
    auto required = run("GOSSAMER_REQUIRE=python,mpi " + kSkip + "mpi 'no MPI here'");
    CHECK(required.status == 1);
    CHECK(required.err == "required component mpi (GOSSAMER_REQUIRE) is missing: no MPI here\n");
    auto other = run("GOSSAMER_REQUIRE=mpi-extra " + kSkip + "mpi 'no MPI here'");
    CHECK(other.status == 77);
}

TEST_CASE("scripts/test.sh refuses an unknown component in GOSSAMER_REQUIRE") {
    auto r = run(std::string("GOSSAMER_REQUIRE=mpi,cuda-bild '") + GOSSAMER_SOURCE_DIR +
                 "/scripts/test.sh'");
    CHECK(r.status == 2);
    CHECK(r.err.find("unknown component 'cuda-bild'") != std::string::npos);
}
