// allreduce's registry entry (registry.hpp): what drivers ask of it before it is built.
#include "gossamer/optimizers/protocol/questions.hpp"
#include "gossamer/optimizers/protocols/allreduce/allreduce.hpp"

namespace gossamer::proto {

Algorithm allreduce_algorithm() {
    Algorithm a;
    a.name = "allreduce";
    a.summary =
        "synchronous data-parallel SGD over a ring all-reduce; period H gives local SGD (the "
        "baseline)";
    a.make = make_allreduce;
    a.defaults = default_for_sim | default_for_launch;
    a.elastic = Elastic::by_option;
    a.elastic_note = "with \"elastic\"";
    // At its default options every step waits for the ring's 2(n-1) hops.
    a.wait_per_step = [](const JobSetup& s, double latency) {
        return default_options(s.options) ? 2.0 * (s.topology->n() - 1) * latency : 0.0;
    };
    // Three model-sized copies for the ring, whatever the degree of the topology.
    a.model_copies = [](const JobSetup&) { return 3.0; };
    // Under "outer" its step averages the pseudo-gradients: DiLoCo. Local SGD's "period" would
    // put a second, uncounted level of local steps under the outer rounds.
    a.outer_refusal = [](const json::Node* options) {
        if (options && options->has("period") && parse_allreduce_options(options).period > 1)
            return std::string(
                "allreduce with \"period\" > 1 is local SGD already; under \"outer\" its "
                "rounds are \"outer.steps\" (outer sgd at lr 1 with no momentum is that local "
                "SGD)");
        return std::string();
    };
    return a;
}

}  // namespace gossamer::proto
