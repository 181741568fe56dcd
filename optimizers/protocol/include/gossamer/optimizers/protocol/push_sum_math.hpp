#pragma once
/// The vector work of the push-sum protocols (sgp, async) on x, z = x / w and the share buffer,
/// in host memory or on the worker's Device (docs/operations/gpu.md): one place for both protocols
/// and both memories. The device calls round exactly as the host code does.

#include <span>
#include <vector>

#include "gossamer/optimizers/protocol/device.hpp"
#include "gossamer/optimizers/protocol/protocol.hpp"

namespace gossamer::proto {

class PushSumMath {
  public:
    /// z and the buffer on the worker's memory (nothing in cost-only mode).
    explicit PushSumMath(LocalWorker& worker);

    bool on() const noexcept { return math_; }
    /// z: the compute point (device memory with a device).
    std::span<float> z() noexcept { return device_ ? dz_.span() : std::span<float>(z_); }
    /// The shares received during a step (host memory only; empty with a device).
    std::span<const float> buffered() const noexcept { return buf_; }

    /// z <- x / w.
    void debias(std::span<const float> x, double w);
    /// out (host) <- x / w, without touching z.
    void debias_to_host(std::span<const float> x, double w, std::span<float> out) const;
    /// z <- x.
    void set_z(std::span<const float> x);
    /// x <- w z.
    void rescale(std::span<float> x, double w);
    /// The payload of a share: fraction * x (host floats).
    std::vector<float> share(std::span<const float> x, double fraction);
    /// x <- self * x: the share a peer keeps.
    void keep(std::span<float> x, double self);
    /// x <- x + payload: a share absorbed at once.
    void add(std::span<float> x, std::span<const float> payload);
    /// buffer <- buffer + payload: a share that came during a step.
    void buffer(std::span<const float> payload);
    /// x <- x + buffer, buffer <- 0.
    void absorb(std::span<float> x);

  private:
    bool math_;
    Device* device_;
    std::vector<float> z_, buf_;
    DeviceVector dz_, dbuf_, dscratch_;
};

}  // namespace gossamer::proto
