#include "api_outer.hpp"

#include <fmt/format.h>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocol/questions.hpp"

namespace gossamer::api {

void check_outer_options(const optim::OuterOptions& o) {
    optim::check_outer_values(o, "", "PeerOptions::outer.");
    // Your loop makes the step() calls and Peer counts them (steps_left()); a round by time would
    // end where your loop does not expect it. Left for later (docs/library/api.md).
    if (o.timed())
        throw ConfigError("", "PeerOptions::outer.seconds",
                          "rounds by time are not offered to gossamer::Peer yet: your loop's "
                          "step() calls are counted, and a timed round would end them early",
                          "use rounds of a fixed step count (outer.steps), or gossamer "
                          "peer/launch/sim for rounds by time");
}

std::unique_ptr<proto::LocalWorker> make_outer_worker(const PeerOptions& options,
                                                      proto::LocalWorker& user,
                                                      const PartitionLayout& layout,
                                                      const json::Node* algorithm_options) {
    if (!options.outer || options.outer->identity()) return nullptr;
    try {
        proto::check_outer_algorithm(options.outer, options.algorithm, algorithm_options, "");
        return optim::make_outer_layer(user, *options.outer, options.steps, &layout, "");
    } catch (const ConfigError& e) {  // the same lines, naming the option
        throw ConfigError("", "PeerOptions::" + e.path(), e.problem(), e.fix());
    }
}

}  // namespace gossamer::api
