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
    if (!o.streaming()) return;
    if (o.steps % o.fragments != 0)
        bad("fragments",
            fmt::format("{} fragments do not divide a round of {} inner steps", o.fragments,
                        o.steps),
            "make steps a multiple of fragments");
    if (!(o.alpha >= 0 && o.alpha < 1))
        bad("alpha", fmt::format("alpha {:g} is outside [0, 1)", o.alpha),
            "use e.g. 0.5 (Streaming DiLoCo's) or 0");
    if (o.overlap < 0 || o.overlap > 1 || (o.overlap == 1 && o.fragments < 2))
        bad("overlap", fmt::format("overlap {} with {} fragments", o.overlap, o.fragments),
            "use 0, or 1 with 2 fragments or more");
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
