// The state inside a checkpoint as the protocols read it back (Protocol::restore,
// docs/operations/checkpoint.md): rank 1 of 4 on a ring, cost-only, 100 steps; the first byte picks
// dpsgd, allreduce, sgp or async. A restored protocol or one ConfigError, never a crash.
#include <memory>

#include "fuzz_support.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocol/protocol.hpp"
#include "gossamer/optimizers/protocol/registry.hpp"
#include "gossamer/topology/schedule.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace gossamer;
    static const char* const kNames[] = {"dpsgd", "allreduce", "sgp", "async"};
    static const auto ring = [] {
        topology::FamilySpec f;
        f.family = "ring";
        f.n = 4;
        return topology::generate(f);
    }();
    fuzz::Input in(data, size);
    const char* name = kNames[in.u8() % 4];
    proto::CostOnlyWorker worker(8);
    auto p = proto::make_protocol(name, nullptr, proto::PeerContext{1, 4, ring, &worker, 100});
    try {
        p->restore("fuzz.state", in.rest_text());
        fuzz::check(p->resumed_at() > 0 && p->resumed_at() < 100,
                    "a restored protocol resumes inside its steps");
        fuzz::check(worker.steps() == p->resumed_at(), "the worker resumes at the cut");
    } catch (const ConfigError&) {
    }
    return 0;
}
