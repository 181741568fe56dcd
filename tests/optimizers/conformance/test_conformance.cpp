// The conformance suite: every protocol of the registry, found by iterating it, held to the
// contract every protocol shares (contract.hpp; docs/algorithms/protocol-contract.md,
// "Conformance"), as tests/transport/test_conformance.cpp holds every transport to its own.
#include <doctest/doctest.h>

#include "optimizers/conformance/contract.hpp"
#include "optimizers/conformance/runs.hpp"
#include "optimizers/conformance/sim_peers.hpp"

using namespace gossamer::conformance;

namespace {

void hold_every(Report (*check)(const Candidate&)) {
    const auto all = registered();
    REQUIRE(all.size() >= 8);
    for (const Candidate& c : all) {
        CAPTURE(c.name);
        const Report r = check(c);
        MESSAGE(c.name << ": " << r.note);
        for (const auto& f : r.findings) FAIL_CHECK(c.name << ": " << f);
    }
}

}  // namespace

TEST_CASE("every registered protocol runs on a topology it accepts, with its defaults") {
    for (const Candidate& c : registered()) {
        CAPTURE(c.name);
        CHECK_NOTHROW(job_for(c));
    }
}

TEST_CASE("every registered protocol sends the same bytes for the same seed") {
    hold_every(same_seed_same_bytes);
}

TEST_CASE("every registered averaging protocol ends the same whatever the order of messages") {
    hold_every(order_independent);
}

TEST_CASE("every registered protocol leaves x and the gradient alone while a step runs") {
    hold_every(ownership);
}

TEST_CASE("every registered protocol outlives a failed neighbour or stops naming it") {
    hold_every(neighbour_failure);
}

TEST_CASE("every registered protocol refuses bad options in one ConfigError line") {
    hold_every(bad_options);
}

TEST_CASE("every registered protocol that resumes ends as the run without the stop") {
    hold_every(checkpoint_round_trip);
}

TEST_CASE("every registered push-sum protocol keeps its mass exact after every event") {
    hold_every(mass_exact);
}

TEST_CASE("every registered protocol runs unchanged under a pass-through layer") {
    hold_every(layered);
}

TEST_CASE("every registered protocol: gossamer sim equals inproc peers") {
    for (const Candidate& c : registered()) {
        CAPTURE(c.name);
        // Averaging protocols end the same whatever the order (checked above): bit for bit.
        const bool exact = !holds_mass(c, job_for(c, 4));
        const Report r = sim_equals_inproc(c, exact);
        MESSAGE(c.name << ": " << r.note);
        for (const auto& f : r.findings) FAIL_CHECK(c.name << ": " << f);
    }
}
