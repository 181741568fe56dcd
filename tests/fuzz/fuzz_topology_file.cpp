// The topology file loader (docs/formats/topology-format.md): any text is a valid topology or one
// ConfigError; anything else (another exception, a crash, a hang) is a bug.
#include "fuzz_support.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/topology/topology_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace gossamer;
    fuzz::Input in(data, size);
    try {
        auto doc = json::parse_text(in.rest_text(), "fuzz.json");
        auto t = topology::parse_topology(doc);
        fuzz::check(t.n() >= 1 && t.schedule != nullptr, "a loaded topology has peers and a graph");
    } catch (const ConfigError&) {
    }
    return 0;
}
