#pragma once
/// `gossamer bench mix`: memory bandwidth of the fused mixing kernel beside memcpy.

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "gossamer/core/json.hpp"
#include "gossamer/core/mixing.hpp"

namespace gossamer::bench {

struct MixOptions {
    std::size_t bytes = 0;   ///< bytes per buffer (S); 0: default_mix_bytes(max_neighbours)
    int max_neighbours = 8;  ///< rows for k = 1..max_neighbours
    int repeats = 5;         ///< timed calls per k and side; the best one counts
    SimdIsa isa = best_simd_isa();
    StorePolicy stores = StorePolicy::automatic;
    std::function<void(std::string_view)> progress;  ///< told before each row (may be empty)
};

struct MixRow {
    int neighbours = 0;
    double mix = 0;     ///< GB/s (1e9 bytes), (k+2)*S bytes per call: k + 1 reads, 1 write
    double memcpy = 0;  ///< GB/s, 2*S bytes per call: 1 read, 1 write
    double target = 0.8;
    double check_seconds = 0;    ///< best first_non_finite() over one buffer of S bytes
    double mix_seconds = 0;      ///< best mix() call with k terms
    double check_target = 0.05;  ///< the check costs at most this share of the mix (issue 37)
};

struct MixReport {
    std::vector<MixRow> rows;
    std::size_t bytes = 0, llc_bytes = 0;
    bool capped = false;  ///< the default S was lowered below 4x the LLC to fit in memory
    std::string isa, stores;
    bool streaming = false;  ///< whether the kernel used non-temporal stores at this size
    int repeats = 0;
    json::Json to_json() const;
    std::string to_text() const;
};

/// Size of the last-level cache in bytes (sysconf; 32 MiB when unknown).
std::size_t last_level_cache_bytes();

/// The default S: max(128 MiB, 4x the LLC), lowered (capped) when the k + 1 buffers would take
/// more than half of the available memory. Sets `capped` accordingly.
std::size_t default_mix_bytes(int max_neighbours, bool& capped);

/// Allocates max_neighbours + 1 buffers of S bytes, touches them, then for each k times mix and
/// memcpy alternately. Throws gossamer::Error when the ISA is not supported here.
MixReport run_mix(const MixOptions& options);

}  // namespace gossamer::bench
