// toy_average's registry entry, as optimizers/protocols/<name>/src/<name>_entry.cpp define theirs:
// every question a driver asks takes its default answer.
#include "toy_algorithm/toy_average.hpp"

namespace toy {

Algorithm toy_average_algorithm() {
    Algorithm a;
    a.name = "toy_average";
    a.summary = "a local SGD step, then a uniform average with the round's in-neighbours";
    a.make = [](const json::Node* options, PeerContext ctx) -> std::unique_ptr<Protocol> {
        if (options) options->expect_object({});
        return std::make_unique<ToyAverage>(std::move(ctx));
    };
    return a;
}

}  // namespace toy
