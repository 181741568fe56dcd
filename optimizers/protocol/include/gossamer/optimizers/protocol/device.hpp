#pragma once
/// Where a peer's vectors live, and the per-round arithmetic of gossip on them
/// (docs/operations/gpu.md, "Parameters on the device").
///
/// A LocalWorker whose parameters live in device memory (a GPU) names its Device; the protocols
/// (all of them) then keep their replicas and receive buffers on
/// that device and do the round's work there (the delta x - x_hat, the replica updates, the
/// compressors, the fused mix, the all-reduce's sums, push-sum's shares and de-bias), crossing to
/// host memory only for what travels: a message payload is downloaded before it is sent and
/// uploaded after it arrives ("staging"). Host memory (the CPU) is not a Device here: the protocols
/// keep their own host code for it, unchanged.
///
/// Memory: allocate() returns device memory as float*. Never dereference it on the host; a
/// std::span over it only carries the pointer and the length. Pointers handed to a call may be
/// anywhere inside an allocation (partitions are sub-ranges of the parameters).
///
/// Every call is complete when it returns: results are in device memory (or in the host buffer),
/// so a call's output may be used by the next call from any thread. The CUDA device queues its
/// kernels on the legacy default stream and waits for them (with a deadline), so it is also
/// ordered with the caller's own work on that stream (PyTorch's default). Calls may come from
/// several threads (a peer's communication thread and the user's thread).
///
/// Errors: gossamer::Error naming what failed; a wait past its deadline throws gossamer::Timeout.

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "gossamer/optimizers/compress/compressor.hpp"

namespace gossamer::proto {

/// One neighbour buffer (device memory) and its weight in a mix.
struct DeviceTerm {
    const float* values = nullptr;
    double weight = 0;
};

class Device {
  public:
    virtual ~Device() = default;

    /// "cuda", "emulated".
    virtual std::string_view name() const noexcept = 0;
    /// One line for logs and metrics: "NVIDIA H200 (sm_90, ...)", "emulated (host pages
    /// guarded between calls)".
    virtual std::string description() const = 0;

    /// n floats of device memory, zeroed. Error when it cannot be allocated.
    virtual float* allocate(std::size_t n) = 0;
    /// Frees what allocate(n) returned (nullptr: nothing).
    virtual void deallocate(float* p, std::size_t n) noexcept = 0;

    /// dst[0, src.size()) <- src (host memory).
    virtual void upload(float* dst, std::span<const float> src) = 0;
    /// y[k] += src[k] for src.size() values: adding a received dense delta (src: host memory).
    virtual void upload_add(float* y, std::span<const float> src) = 0;
    /// dst (host memory) <- src[0, dst.size()).
    virtual void download(std::span<float> dst, const float* src) = 0;
    /// dst <- src, n floats, both on the device (they may not overlap).
    virtual void copy(float* dst, const float* src, std::size_t n) = 0;

    /// x <- w_self*x + sum_j w_j*t_j in float, rounded as the CPU's fused mix
    /// (gossamer/core/mixing.hpp): bit-identical to its FMA paths.
    virtual void mix(float* x, double w_self, std::span<const DeviceTerm> terms, std::size_t n) = 0;
    /// d <- x - x_hat (d may be x or x_hat).
    virtual void delta(float* d, const float* x, const float* x_hat, std::size_t n) = 0;
    /// y <- y + a*x.
    virtual void axpy(float* y, float a, const float* x, std::size_t n) = 0;
    /// y <- y / divisor (IEEE division, as the CPU: the all-reduce's average).
    virtual void divide(float* y, float divisor, std::size_t n) = 0;
    /// y <- float(a * double(x)): a push-sum share, and x = w z (y may be x).
    virtual void scale(float* y, double a, const float* x, std::size_t n) = 0;
    /// z <- float(double(x) / w): the push-sum de-biased model (z may be x).
    virtual void debias(float* z, const float* x, double w, std::size_t n) = 0;
    /// y <- 0.
    virtual void zero(float* y, std::size_t n) = 0;

    /// q.encode() of the n device floats at x into the host bytes `out` (at least
    /// q.encoded_bytes(n)): the same bytes as the CPU's encode of the same floats (int8's
    /// stochastic rounding excepted, docs/operations/gpu.md "Tolerances").
    virtual void encode(const optim::Compressor& q, const float* x, std::size_t n,
                        const optim::CodecKey& key, std::span<std::byte> out) = 0;
    /// q.decode_add() of the host bytes `in` into the n device floats at y.
    virtual void decode_add(const optim::Compressor& q, std::span<const std::byte> in,
                            const optim::CodecKey& key, float* y, std::size_t n) = 0;
};

/// A CPU stand-in for a device, for tests of the device code paths where there is no GPU: its
/// memory is host pages that are inaccessible (PROT_NONE) except inside its own calls, which
/// run one at a time and compute exactly as the CPU path does. A host read or write of device
/// memory outside a Device call therefore crashes the test instead of passing unnoticed.
/// One per process (every caller gets the same), so that a test can allocate memory that a
/// peer's device then accepts.
std::shared_ptr<Device> emulated_device();

/// Device memory of n floats from `device` (zeroed), freed by the destructor. Move-only. Empty
/// (no device) when default-constructed.
class DeviceVector {
  public:
    DeviceVector() = default;
    DeviceVector(Device& device, std::size_t n)
        : device_(&device), data_(device.allocate(n)), n_(n) {}
    ~DeviceVector() { reset(); }
    DeviceVector(DeviceVector&& o) noexcept : device_(o.device_), data_(o.data_), n_(o.n_) {
        o.data_ = nullptr;
        o.n_ = 0;
    }
    DeviceVector& operator=(DeviceVector&& o) noexcept {
        if (this != &o) {
            reset();
            device_ = o.device_;
            data_ = o.data_;
            n_ = o.n_;
            o.data_ = nullptr;
            o.n_ = 0;
        }
        return *this;
    }
    DeviceVector(const DeviceVector&) = delete;
    DeviceVector& operator=(const DeviceVector&) = delete;

    float* data() const noexcept { return data_; }
    std::size_t size() const noexcept { return n_; }
    bool empty() const noexcept { return n_ == 0; }
    /// The memory as a span (device memory: pointer and length only).
    std::span<float> span() const noexcept { return {data_, n_}; }

  private:
    void reset() noexcept {
        if (device_ && data_) device_->deallocate(data_, n_);
        data_ = nullptr;
        n_ = 0;
    }
    Device* device_ = nullptr;
    float* data_ = nullptr;
    std::size_t n_ = 0;
};

}  // namespace gossamer::proto
