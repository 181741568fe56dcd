// choco's registry entry (registry.hpp): what drivers ask of it before it is built.
#include "gossamer/optimizers/protocol/questions.hpp"
#include "gossamer/optimizers/protocols/choco/choco.hpp"

namespace gossamer::proto {

Algorithm choco_algorithm() {
    Algorithm a;
    a.name = "choco";
    a.summary = "CHOCO-SGD: gossip of compressed deltas against public replicas";
    a.make = make_choco;
    a.per_partition_gossip = true;
    // At its default options every step waits for one hop from each in-neighbour.
    a.wait_per_step = [](const JobSetup& s, double latency) {
        return default_options(s.options) ? latency : 0.0;
    };
    a.resync_timeout = [](const json::Node* o) { return parse_choco_options(o).resync_timeout; };
    return a;
}

}  // namespace gossamer::proto
