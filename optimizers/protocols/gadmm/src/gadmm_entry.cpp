// gadmm's registry entry (registry.hpp): it answers every driver's question with the default.
#include "gossamer/optimizers/protocol/registry.hpp"
#include "gossamer/optimizers/protocols/gadmm/gadmm.hpp"

namespace gossamer::proto {

Algorithm gadmm_algorithm() {
    Algorithm a;
    a.name = "gadmm";
    a.summary = "group ADMM on a chain";
    a.make = make_gadmm;
    return a;
}

}  // namespace gossamer::proto
