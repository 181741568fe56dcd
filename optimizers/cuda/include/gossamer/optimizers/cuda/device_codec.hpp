#pragma once
/// A compressor (gossamer/optimizers/compressor.hpp) whose vectors live on the GPU: the same
/// configuration, keys and wire format as the CPU Compressor, encoding from and decoding into
/// device memory with the gossamer::cuda kernels. Messages are interchangeable with the CPU's
/// (docs/operations/gpu.md, "Tolerances": int8's rounding draws differ, its format does not).
///
/// Not thread-safe: one DeviceCodec per thread (it keeps scratch memory).

#include <cstddef>
#include <memory>

#include "gossamer/cuda/compress.hpp"
#include "gossamer/cuda/runtime.hpp"
#include "gossamer/optimizers/compress/compressor.hpp"

namespace gossamer::optim::cuda {

class DeviceCodec {
  public:
    /// For vectors of up to `capacity` values. Throws Error for an invalid config (as
    /// make_compressor()) and when device scratch cannot be allocated.
    DeviceCodec(const CompressorConfig& config, std::size_t capacity);

    const CompressorConfig& config() const noexcept { return config_; }
    /// As Compressor::encoded_bytes() and kept().
    std::size_t encoded_bytes(std::size_t n) const { return cpu_->encoded_bytes(n); }
    std::size_t kept(std::size_t n) const { return cpu_->kept(n); }

    /// Encodes the n device floats at x into the device bytes at out (encoded_bytes(n) of them),
    /// queued on `stream` (a cudaStream_t as void*). random-k draws its indices on the host (the
    /// CPU code, O(k)) and uploads them after waiting for `stream` (its index buffer is reused).
    /// Error when n > capacity.
    void encode(const float* x, std::size_t n, const CodecKey& key, std::byte* out,
                void* stream = nullptr);
    /// y += Q(x) from the device bytes at in. top-k waits for the stream to check its indices.
    void decode_add(const std::byte* in, const CodecKey& key, float* y, std::size_t n,
                    void* stream = nullptr);

  private:
    void check_capacity(std::size_t n) const;  // Error when n > capacity
    const std::uint32_t* upload_indices(std::size_t n, const CodecKey& key, void* stream);

    CompressorConfig config_;
    std::unique_ptr<Compressor> cpu_;
    std::size_t capacity_;
    gossamer::cuda::TopKWorkspace topk_;
    gossamer::cuda::DeviceBuffer indices_;  // random-k: the drawn indices, as uint32
};

}  // namespace gossamer::optim::cuda
