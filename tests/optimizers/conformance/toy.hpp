#pragma once
/// A small push-sum protocol that conforms, and the same protocol with one flaw each: what the
/// conformance suite must catch (test_broken.cpp). Known only to that test; never registered.
///
/// The rule: peers sit on a directed ring by rank (rank r sends to r + 1 and hears from r - 1).
/// After step t a peer takes its optimizer step on x and sends a share of (x, w) to its successor
/// as round t (half from even ranks, a quarter from odd ones, so the weights differ), then starts
/// step t + 1 once round t of its predecessor is absorbed (or the predecessor failed). Shares that
/// arrive while a step runs wait in a buffer; the model is z = x / w. It cuts a checkpoint at the
/// start of a step, when every share of an earlier round is absorbed and none of a later one is.

#include <cstdint>
#include <string>

#include "optimizers/conformance/contract.hpp"

namespace gossamer::conformance {

enum class Flaw {
    none,
    scribbles,       ///< absorbs a share into x while its step runs (the ownership rule)
    reads_gradient,  ///< takes its optimizer step with the gradient of the step that runs now
    random,          ///< perturbs what it sends by a process-wide counter (not the seed's bytes)
    leaks_mass,      ///< sends half the weight it gives away (push-sum mass)
    waits_forever,   ///< ignores a failed predecessor and waits for its share (a hang)
    lax_options,     ///< accepts any options (no ConfigError)
    cuts_early,      ///< cuts a checkpoint before it absorbs the shares of the round it ends,
                     ///< counting them as taken (an inconsistent cut: resume loses them)
};

/// The toy with `flaw`, as a conformance candidate named "toy" (plus the flaw).
Candidate toy(Flaw flaw = Flaw::none);

}  // namespace gossamer::conformance
