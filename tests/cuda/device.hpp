#pragma once
// For the parity tests: whether a CUDA device is here; if not, the case is skipped (optional
// component cuda-device: support/optional.hpp), never passed, and fails under
// GOSSAMER_REQUIRE=cuda-device (scripts/gpu_check.sh on the GPU machine).

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gossamer/core/mixing.hpp"
#include "gossamer/cuda/runtime.hpp"
#include "support/optional.hpp"

namespace gossamer::test {

inline bool cuda_device_or_skip() {
    if (cuda::device_count() > 0) return true;
    // device_description() starts with "no CUDA device: " and says why.
    return have_component("cuda-device", cuda::device_description());
}

/// n floats of mixed signs and magnitudes (normal, scaled by powers of two), reproducible.
inline std::vector<float> test_values(std::size_t n, unsigned seed) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_int_distribution<int> exponent(-12, 12);
    std::vector<float> v(n);
    for (auto& x : v) x = std::ldexp(normal(gen), exponent(gen));
    return v;
}

// Bit-identical when the CPU reference used FMAs; otherwise within (terms + 1) roundings of the
// sum of magnitudes.
inline void check_close(const std::vector<float>& gpu, const std::vector<float>& cpu,
                        const std::vector<float>& magnitude, int terms) {
    REQUIRE(gpu.size() == cpu.size());
    const bool fma = gossamer::best_simd_isa() != gossamer::SimdIsa::scalar;
    std::size_t bad = 0;
    for (std::size_t i = 0; i < gpu.size(); ++i) {
        const bool ok = fma ? std::memcmp(&gpu[i], &cpu[i], sizeof(float)) == 0
                            : std::abs(gpu[i] - cpu[i]) <= (terms + 1) * 0x1.0p-23f * magnitude[i];
        if (!ok && bad++ < 3) INFO("element " << i << ": gpu " << gpu[i] << ", cpu " << cpu[i]);
    }
    CHECK(bad == 0);
}

// Bit-identical, except that any NaN matches any NaN: arithmetic on a NaN gives the canonical
// NaN on the GPU and keeps the operand's payload on x86.
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (std::isnan(a[i]) && std::isnan(b[i])) continue;
        if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return false;
    }
    return true;
}

/// int8 wire bytes of n values in blocks of `block` against the CPU's: identical scales, codes
/// within one step (the stochastic-rounding draws differ; docs/operations/gpu.md, "Tolerances").
inline void check_int8_wire(const std::vector<std::byte>& got, const std::vector<std::byte>& ref,
                            std::size_t n, std::size_t block) {
    REQUIRE(got.size() == ref.size());
    const std::size_t scales = 4 * ((n + block - 1) / block);
    CHECK(std::memcmp(got.data(), ref.data(), scales) == 0);
    std::size_t far = 0;
    for (std::size_t k = scales; k < scales + n; ++k)
        far += std::abs(static_cast<std::int8_t>(got[k]) - static_cast<std::int8_t>(ref[k])) > 1;
    CHECK(far == 0);
}

/// A device copy of a host vector, and back.
inline cuda::DeviceBuffer upload(const std::vector<float>& v) {
    cuda::DeviceBuffer b(v.size() * sizeof(float));
    cuda::copy_to_device(b.data(), v.data(), v.size() * sizeof(float));
    return b;
}
inline std::vector<float> download(const cuda::DeviceBuffer& b, std::size_t n,
                                   std::size_t offset = 0) {
    std::vector<float> v(n);
    cuda::synchronize();
    cuda::copy_to_host(v.data(), b.as<float>() + offset, n * sizeof(float));
    return v;
}

}  // namespace gossamer::test
