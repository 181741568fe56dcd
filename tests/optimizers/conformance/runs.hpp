#pragma once
/// One run of a candidate through the harness, and how two runs are compared (contract.hpp).

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "optimizers/conformance/contract.hpp"

namespace gossamer::conformance {

/// What a run left.
struct Outcome {
    std::vector<proto::Message> sent;        ///< every message, in send order
    std::vector<std::vector<float>> models;  ///< by rank, current_model at the end
    std::vector<std::int64_t> steps;         ///< by rank, the steps it finished
    double mass = 0;                         ///< the sum of mass() over the live peers
    std::int64_t early = 0;                  ///< messages delivered while a step ran
    bool done = false;                       ///< every live peer done
    std::string error;                       ///< what the run threw, if it did
};

using HarnessHook = std::function<void(testing::Harness&)>;

/// Runs the job: `before` is called on the built harness, `after` once it ran; `custom`
/// replaces the job's peers. Exceptions are caught into Outcome::error.
Outcome run(const Candidate& c, const Job& job, const testing::HarnessOptions& options,
            const HarnessHook& before = {}, const HarnessHook& after = {},
            const testing::Peers* custom = nullptr);

/// The first difference between two logs of messages ("" when none), bit for bit.
std::string first_difference(const std::vector<proto::Message>& a,
                             const std::vector<proto::Message>& b);
bool same_bits(const std::vector<float>& a, const std::vector<float>& b);

/// Whether the candidate holds push-sum mass (held_mass() > 0 on a fresh peer).
bool holds_mass(const Candidate& c, const Job& job);
/// The candidate's resume_refusal() on the job.
std::string resume_refusal(const Candidate& c, const Job& job);

}  // namespace gossamer::conformance
