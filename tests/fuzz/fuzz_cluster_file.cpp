// The cluster file loader (docs/formats/cluster-format.md), for a topology of 1 to 16 peers: a
// valid cluster or one ConfigError.
#include "fuzz_support.hpp"
#include "gossamer/core/cluster.hpp"
#include "gossamer/core/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace gossamer;
    fuzz::Input in(data, size);
    // The peer count comes from the text's length, so that the text itself stays JSON.
    const int n = 1 + static_cast<int>(size % 16);
    try {
        auto doc = json::parse_text(in.rest_text(), "fuzz.json");
        auto c = parse_cluster(doc, n);
        fuzz::check(c.n() == n, "a loaded cluster has one spec per peer");
        for (const auto& p : c.peers)
            fuzz::check(p.base_time > 0 && p.factor > 0 && p.uplink > 0 && p.downlink > 0,
                        "a loaded cluster's times and rates are positive");
    } catch (const ConfigError&) {
    }
    return 0;
}
