// sgp's registry entry (registry.hpp): what drivers ask of it before it is built.
#include "gossamer/optimizers/protocol/questions.hpp"
#include "gossamer/optimizers/protocols/sgp/sgp.hpp"

namespace gossamer::proto {

Algorithm sgp_algorithm() {
    Algorithm a;
    a.name = "sgp";
    a.summary =
        "stochastic gradient push: push-sum shares on directed, time-varying graphs, bounded "
        "staleness";
    a.make = make_sgp;
    a.defaults = default_for_sim;
    // A peer may run `staleness` rounds ahead of what it has absorbed.
    a.wait_per_step = [](const JobSetup& s, double latency) {
        return latency / static_cast<double>(parse_sgp_options(s.options).staleness + 1);
    };
    return a;
}

}  // namespace gossamer::proto
