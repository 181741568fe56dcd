// async's registry entry (registry.hpp): what drivers ask of it before it is built.
#include "gossamer/optimizers/protocol/questions.hpp"
#include "gossamer/optimizers/protocols/async/async_gossip.hpp"

namespace gossamer::proto {

Algorithm async_algorithm() {
    Algorithm a;
    a.name = "async";
    a.summary = "wait-free push-sum with straggler-aware, sender-side weights";
    a.make = make_async;
    a.defaults = default_for_launch;
    a.elastic = Elastic::always;
    return a;
}

}  // namespace gossamer::proto
