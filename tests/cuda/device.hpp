#pragma once
// For the parity tests: whether a CUDA device is here; if not, says "skipped: no CUDA device"
// (ctest's SKIP_REGULAR_EXPRESSION turns the case into a skip, never a pass).

#include <doctest/doctest.h>

#include <random>
#include <vector>

#include "gossamer/cuda/runtime.hpp"

namespace gossamer::test {

inline bool cuda_device_or_skip() {
    if (cuda::device_count() > 0) return true;
    // device_description() starts with "no CUDA device: " and says why.
    MESSAGE("skipped: " << cuda::device_description());
    return false;
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
