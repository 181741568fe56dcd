// lsgd's registry entry (registry.hpp): it answers every driver's question with the default.
#include "gossamer/optimizers/protocol/registry.hpp"
#include "gossamer/optimizers/protocols/lsgd/lsgd.hpp"

namespace gossamer::proto {

Algorithm lsgd_algorithm() {
    Algorithm a;
    a.name = "lsgd";
    a.summary = "leader SGD: a pull towards the best neighbour's model";
    a.make = make_lsgd;
    return a;
}

}  // namespace gossamer::proto
