#pragma once
/// (b) `gossamer sim` equals inproc peers (contract.hpp): a registered candidate's training job
/// through the simulator and through real-time peers of the peer driver.
#include "optimizers/conformance/contract.hpp"

namespace gossamer::conformance {

/// With `bit_for_bit` (an averaging protocol, order_independent()): the same final loss to the
/// last bit. Otherwise (push-sum, whose models follow the order shares arrive in, i.e. thread
/// timing) what is deterministic: the steps of every peer, the mass exact, and that both train.
Report sim_equals_inproc(const Candidate& c, bool bit_for_bit);

}  // namespace gossamer::conformance
