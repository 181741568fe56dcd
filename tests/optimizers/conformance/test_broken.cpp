// The suite catches a protocol that breaks the contract: a toy push-sum protocol conforms, and
// the same toy with one flaw each fails the check of that part of the contract (toy.hpp).
#include <doctest/doctest.h>

#include <string>

#include "optimizers/conformance/contract.hpp"
#include "optimizers/conformance/runs.hpp"
#include "optimizers/conformance/toy.hpp"

using namespace gossamer::conformance;

namespace {

// The findings of `check` on the toy with `flaw`, which must hold one that contains `what`.
void caught(Report (*check)(const Candidate&), Flaw flaw, const std::string& what) {
    const Candidate c = toy(flaw);
    CAPTURE(c.name);
    const Report r = check(c);
    REQUIRE_FALSE(r.ok());
    bool found = false;
    for (const auto& f : r.findings) {
        CAPTURE(f);
        found = found || f.find(what) != std::string::npos;
    }
    CHECK_MESSAGE(found, "no finding says \"" << what << "\"");
}

}  // namespace

TEST_CASE("the toy protocol conforms: every check passes") {
    const Candidate c = toy();
    for (auto* check : {same_seed_same_bytes, ownership, neighbour_failure, bad_options,
                        checkpoint_round_trip, mass_exact}) {
        const Report r = check(c);
        INFO(r.note);
        for (const auto& f : r.findings) FAIL_CHECK(f);
    }
    CHECK(holds_mass(c, job_for(c)));
    CHECK(resume_refusal(c, job_for(c)).empty());
}

TEST_CASE("the suite catches a protocol that writes x while a step runs") {
    caught(ownership, Flaw::scribbles, "changed its parameters (x) while its step ran");
}

TEST_CASE("the suite catches a protocol that reads the gradient while a step runs") {
    caught(ownership, Flaw::reads_gradient, "read the gradient buffer while a step ran");
}

TEST_CASE("the suite catches a protocol whose bytes do not follow the seed") {
    caught(same_seed_same_bytes, Flaw::random, "send different bytes");
}

TEST_CASE("the suite catches a protocol that loses push-sum mass") {
    caught(mass_exact, Flaw::leaks_mass, "strayed");
}

TEST_CASE("the suite catches a protocol that waits for a failed neighbour") {
    caught(neighbour_failure, Flaw::waits_forever, "hangs");
}

TEST_CASE("the suite catches a protocol that accepts options it does not know") {
    caught(bad_options, Flaw::lax_options, "are accepted");
}

TEST_CASE("the suite catches a protocol that does not resume exactly") {
    caught(checkpoint_round_trip, Flaw::cuts_early, "mass");
}
