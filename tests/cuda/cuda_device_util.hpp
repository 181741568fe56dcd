#pragma once
// For the CUDA Device tests: the device (or a skip), and host vectors to and from DeviceVectors.

#include <memory>
#include <vector>

#include "cuda/device.hpp"
#include "gossamer/optimizers/cuda/cuda_device.hpp"
#include "gossamer/optimizers/protocol/device.hpp"

namespace gossamer::test {

/// The CUDA device, or nullptr after the skip of cuda_device_or_skip().
inline std::shared_ptr<proto::Device> cuda_device_or_null(
    const optim::cuda::CudaDeviceOptions& options = {}) {
    if (!cuda_device_or_skip()) return nullptr;
    return optim::cuda::make_cuda_device(options);
}

/// Device memory holding v.
inline proto::DeviceVector put(proto::Device& d, const std::vector<float>& v) {
    proto::DeviceVector out(d, v.size());
    d.upload(out.data(), v);
    return out;
}

/// The n device floats at p.
inline std::vector<float> get(proto::Device& d, const float* p, std::size_t n) {
    std::vector<float> out(n);
    d.download(out, p);
    return out;
}

}  // namespace gossamer::test
