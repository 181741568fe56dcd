#include "api_outer.hpp"

#include <fmt/format.h>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocol/questions.hpp"

namespace gossamer::api {

void check_outer_options(const optim::OuterOptions& o) {
    optim::check_outer_values(o, "", "PeerOptions::outer.");
}

std::unique_ptr<optim::OuterWorker> make_outer_worker(const PeerOptions& options,
                                                      proto::LocalWorker& user,
                                                      const PartitionLayout& layout,
                                                      const json::Node* algorithm_options) {
    if (!options.outer || options.outer->identity()) return nullptr;
    try {
        proto::check_outer_algorithm(options.outer, options.algorithm, algorithm_options, "");
        return std::make_unique<optim::OuterWorker>(user, *options.outer, options.steps, &layout,
                                                    "");
    } catch (const ConfigError& e) {  // the same lines, naming the option
        throw ConfigError("", "PeerOptions::" + e.path(), e.problem(), e.fix());
    }
}

}  // namespace gossamer::api
