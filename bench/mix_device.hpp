#pragma once
/// `gossamer bench mix --device cuda`: effective bandwidth of the device kernels (mixing, delta,
/// push-sum share and de-bias, fp16 and int8 encode/decode) beside a device-to-device
/// cudaMemcpy moving the same bytes, alternated in the same run; top-k and random-k as time per
/// element. Builds without CUDA too, where it refuses with one line (docs/operations/gpu.md).

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "gossamer/core/json.hpp"

namespace gossamer::bench {

struct MixDeviceOptions {
    std::string device = "cuda";  ///< only "cuda" exists
    std::size_t bytes = 0;        ///< bytes per parameter buffer (S); 0: 256 MiB
    int repeats = 20;             ///< calls per timing; the best of 3 alternations counts
    std::function<void(std::string_view)> progress;  ///< told before each row (may be empty)
};

struct MixDeviceRow {
    std::string kernel;
    double bytes = 0;            ///< bytes read + written per call
    double gb_per_s = 0;         ///< bytes / time, 1e9 bytes
    double memcpy_gb_per_s = 0;  ///< cudaMemcpy D2D of bytes / 2 (it reads and writes them)
    double ns_per_element = 0;   ///< time per element of the parameter vector
    double target = 0;           ///< ratio target; 0: none (top-k, random-k)
};

struct MixDeviceReport {
    std::vector<MixDeviceRow> rows;
    std::string device;
    std::string transfer_path;      ///< "staging", "ucx-cuda" (docs/operations/gpu.md), "unknown"
    std::string transfer_evidence;  ///< UCP's memory types, or why UCP could not say
    std::size_t bytes = 0;
    int repeats = 0;
    json::Json to_json() const;
    std::string to_text() const;
};

/// Whether this build holds the CUDA kernels (GOSSAMER_USE_CUDA).
bool cuda_built() noexcept;

/// Runs the device rows. ConfigError (exit 2) when `device` is not "cuda", this build has no
/// CUDA support or there is no device here; Error when a kernel fails.
MixDeviceReport run_mix_device(const MixDeviceOptions& options);

}  // namespace gossamer::bench
