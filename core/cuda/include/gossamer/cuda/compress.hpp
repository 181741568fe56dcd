#pragma once
/// Device encoders and decoders with the wire formats of the CPU compressors
/// (gossamer/optimizers/compressor.hpp, docs/algorithms/compression.md): a message encoded on the
/// device decodes on the CPU and the other way round. Buffers are device memory; `out` must hold
/// the CPU Compressor's encoded_bytes(n). Calls queue kernels on `stream` and return at once,
/// except those documented to wait.
///
/// Equality with the CPU (docs/operations/gpu.md, "Tolerances"): fp16, top-k, random-k and every
/// decoder give bit-identical bytes and floats; int8 gives identical scales and codes that differ
/// from the CPU's by at most one step where the stochastic-rounding draws differ (the device draws
/// from a counter-based hash of (seed, index), the CPU from a sequential xoshiro stream; only
/// the sender draws, so the receiver decodes the same either way).

#include <cstddef>
#include <cstdint>

#include "gossamer/cuda/runtime.hpp"

namespace gossamer::cuda {

/// fp16: n halves, rounded to nearest even; finite values past 65504 saturate, NaN and infinities
/// are kept (as the CPU's float_to_half).
void fp16_encode(const float* x, std::size_t n, std::byte* out, void* stream = nullptr);
/// y += the n halves of `in`.
void fp16_decode_add(const std::byte* in, std::size_t n, float* y, void* stream = nullptr);

/// int8: ceil(n / block) float scales max|x|/127, then n codes in [-127, 127] with stochastic
/// rounding drawn from `seed` (any 64-bit value; the same seed gives the same bytes). block >= 1.
void int8_encode(const float* x, std::size_t n, std::size_t block, std::uint64_t seed,
                 std::byte* out, void* stream = nullptr);
/// y += q * scale for every value.
void int8_decode_add(const std::byte* in, std::size_t n, std::size_t block, float* y,
                     void* stream = nullptr);

/// Scratch memory of the top-k selection for vectors of up to `capacity` values, allocated on
/// the device at first use (about 2 bytes per 1,000 values).
class TopKWorkspace {
  public:
    explicit TopKWorkspace(std::size_t capacity) : capacity_(capacity) {}
    std::size_t capacity() const noexcept { return capacity_; }
    /// Device scratch (internal to topk_encode and topk_decode_add); allocates it when needed.
    std::uint32_t* scratch();

  private:
    std::size_t capacity_;
    DeviceBuffer buffer_;
};

/// top-k: the k values of largest magnitude (NaN counts as infinite; equal magnitudes go to the
/// lower index, as on the CPU), written as k uint32 indices in ascending order then their k
/// values. Radix select of the k-th largest magnitude in four 8-bit passes, then an
/// order-preserving compaction (docs/operations/gpu.md). 1 <= k <= n < 2^32 and n <= ws.capacity()
/// (Error).
void topk_encode(const float* x, std::size_t n, std::size_t k, std::byte* out, TopKWorkspace& ws,
                 void* stream = nullptr);
/// y += the k (index, value) pairs of `in`. Waits for the stream, then throws Error when an index
/// is >= n (y is then partly updated, as on the CPU).
void topk_decode_add(const std::byte* in, std::size_t k, std::size_t n, float* y, TopKWorkspace& ws,
                     void* stream = nullptr);

/// random-k encode: out[i] = x[idx[i]] for i < k. The indices are the ones the CPU RandomK draws
/// for the message's CodecKey (drawn on the host: O(k)) and uploaded once per message.
void gather(const float* x, const std::uint32_t* idx, std::size_t k, float* out,
            void* stream = nullptr);
/// random-k decode: y[idx[i]] += values[i] for i < k (indices distinct).
void scatter_add(const float* values, const std::uint32_t* idx, std::size_t k, float* y,
                 void* stream = nullptr);

}  // namespace gossamer::cuda
