#pragma once
/// The CUDA implementation of proto::Device (gossamer/optimizers/device.hpp;
/// docs/operations/gpu.md, "The CUDA device"): device memory from cudaMalloc, the gossamer::cuda
/// kernels on the legacy default stream, waited for with a deadline before each call returns,
/// payloads staged through pinned host memory, and the compressors as DeviceCodecs (one per
/// compressor configuration).
///
/// Threading: every call may come from any thread; calls that share scratch memory (upload_add,
/// encode, decode_add) and staged transfers take turns.

#include <chrono>
#include <cstddef>
#include <memory>

#include "gossamer/optimizers/protocol/device.hpp"

namespace gossamer::optim::cuda {

struct CudaDeviceOptions {
    /// Deadline of each wait for the device (gossamer::Timeout past it).
    std::chrono::milliseconds timeout{30000};
    /// Host transfers of at least this many bytes go through DeviceStaging (pinned, chunked,
    /// overlapped); smaller ones are one plain copy.
    std::size_t staging_min_bytes = std::size_t{4} << 20;
};

/// The CUDA device 0. Throws gossamer::Error in one line when there is none ("no CUDA device:
/// <why>; use device \"cpu\"").
std::shared_ptr<proto::Device> make_cuda_device(const CudaDeviceOptions& options = {});

}  // namespace gossamer::optim::cuda
