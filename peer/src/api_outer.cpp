#include "api_outer.hpp"

#include <fmt/format.h>

#include <cmath>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocol/questions.hpp"

namespace gossamer::api {

void check_outer_options(const optim::OuterOptions& o) {
    const auto bad = [](const char* field, std::string what, const char* fix) {
        throw ConfigError("", fmt::format("PeerOptions::outer.{}", field), std::move(what), fix);
    };
    if (o.steps < 1)
        bad("steps", fmt::format("{} inner steps per round; a round takes at least one", o.steps),
            "use an integer >= 1, e.g. 8");
    if (!(o.lr > 0) || !std::isfinite(o.lr))
        bad("lr", fmt::format("outer learning rate {:g} must be finite and > 0", o.lr),
            "use e.g. 1.0 (local SGD) or 0.7 (DiLoCo's)");
    if (!(o.momentum >= 0 && o.momentum < 1))
        bad("momentum", fmt::format("outer momentum {:g} is outside [0, 1)", o.momentum),
            "use e.g. 0 or 0.9");
    if (o.kind == optim::OuterKind::nesterov && o.momentum == 0)
        bad("momentum", "Nesterov's outer step needs momentum > 0",
            "set momentum, e.g. 0.9, or use the sgd outer optimizer");
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
