// qallreduce's registry entry (registry.hpp): it answers every driver's question with the default.
#include "gossamer/optimizers/protocol/registry.hpp"
#include "gossamer/optimizers/protocols/qallreduce/qallreduce.hpp"

namespace gossamer::proto {

Algorithm qallreduce_algorithm() {
    Algorithm a;
    a.name = "qallreduce";
    a.summary = "ring all-reduce of compressed payloads with error feedback";
    a.make = make_qallreduce;
    return a;
}

}  // namespace gossamer::proto
