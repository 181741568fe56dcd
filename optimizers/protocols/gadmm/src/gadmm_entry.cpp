// gadmm's registry entry (registry.hpp): every driver's question but "outer" takes the default.
#include "gossamer/optimizers/protocol/registry.hpp"
#include "gossamer/optimizers/protocols/gadmm/gadmm.hpp"

namespace gossamer::proto {

Algorithm gadmm_algorithm() {
    Algorithm a;
    a.name = "gadmm";
    a.summary = "group ADMM on a chain";
    a.make = make_gadmm;
    // Its primal step is already `local_steps` inner steps on a penalised objective, with the
    // duals updated between rounds: an outer optimizer on top would step the duals' consensus
    // as if it were a pseudo-gradient.
    a.outer_refusal = [](const json::Node*) {
        return std::string(
            "gadmm takes local steps of its own (\"local_steps\") on a penalised objective and "
            "cannot take an outer optimizer");
    };
    return a;
}

}  // namespace gossamer::proto
