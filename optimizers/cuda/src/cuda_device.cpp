#include "gossamer/optimizers/cuda/cuda_device.hpp"

#include <fmt/format.h>

#include <cstring>
#include <limits>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gossamer/core/error.hpp"
#include "gossamer/cuda/kernels.hpp"
#include "gossamer/cuda/runtime.hpp"
#include "gossamer/cuda/staging.hpp"
#include "gossamer/optimizers/cuda/device_codec.hpp"

namespace gossamer::optim::cuda {

namespace {

namespace dev = gossamer::cuda;

bool same_config(const CompressorConfig& a, const CompressorConfig& b) {
    return a.kind == b.kind && a.block == b.block && a.fraction == b.fraction && a.seed == b.seed;
}

std::size_t float_bytes(std::size_t n) {
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(float))
        throw Error(fmt::format("cuda device: {} floats do not fit in memory", n));
    return n * sizeof(float);
}

class CudaDevice final : public proto::Device {
  public:
    explicit CudaDevice(const CudaDeviceOptions& options)
        : options_(options),
          description_(dev::device_description()),
          device_(dev::current_device()) {}

    std::string_view name() const noexcept override { return "cuda"; }
    std::string description() const override { return description_; }

    float* allocate(std::size_t n) override {
        use();
        if (n == 0) return nullptr;
        dev::DeviceBuffer buffer(float_bytes(n));
        dev::fill_zero(buffer.data(), buffer.size());
        wait();
        float* p = buffer.as<float>();
        const std::lock_guard lock(allocations_mutex_);
        allocations_.emplace(p, std::move(buffer));
        return p;
    }

    void deallocate(float* p, std::size_t) noexcept override {
        if (!p) return;
        dev::DeviceBuffer freed;  // cudaFree outside the lock
        const std::lock_guard lock(allocations_mutex_);
        if (auto it = allocations_.find(p); it != allocations_.end()) {
            freed = std::move(it->second);
            allocations_.erase(it);
        }
    }

    void upload(float* dst, std::span<const float> src) override {
        use();
        to_device(dst, src.data(), float_bytes(src.size()));
    }

    void upload_add(float* y, std::span<const float> src) override {
        use();
        const std::lock_guard lock(scratch_mutex_);
        float* s = reinterpret_cast<float*>(scratch(float_bytes(src.size())));
        to_device(s, src.data(), float_bytes(src.size()));
        // fmaf(1, s, y) is y + s rounded once: the CPU's y[k] += src[k].
        dev::axpy(y, 1.0f, s, src.size());
        wait();
    }

    void download(std::span<float> dst, const float* src) override {
        use();
        to_host(dst.data(), src, float_bytes(dst.size()));
    }

    void copy(float* dst, const float* src, std::size_t n) override {
        use();
        dev::copy_device(dst, src, float_bytes(n));
        wait();
    }

    void mix(float* x, double w_self, std::span<const proto::DeviceTerm> terms,
             std::size_t n) override {
        use();
        // Weights rounded to float as the CPU's gossip mix does
        // (optimizers/protocol/src/gossip_mix.cpp).
        std::vector<dev::DeviceTerm> fused;
        fused.reserve(terms.size());
        for (const auto& t : terms) fused.push_back({t.values, static_cast<float>(t.weight)});
        dev::mix(x, static_cast<float>(w_self), fused, n);
        wait();
    }

    void delta(float* d, const float* x, const float* x_hat, std::size_t n) override {
        use();
        dev::delta(d, x, x_hat, n);
        wait();
    }

    void axpy(float* y, float a, const float* x, std::size_t n) override {
        use();
        dev::axpy(y, a, x, n);
        wait();
    }

    void divide(float* y, float divisor, std::size_t n) override {
        use();
        dev::divide(y, divisor, n);
        wait();
    }

    void scale(float* y, double a, const float* x, std::size_t n) override {
        use();
        dev::scale_double(y, a, x, n);
        wait();
    }

    void debias(float* z, const float* x, double w, std::size_t n) override {
        use();
        dev::debias(z, x, w, n);
        wait();
    }

    void zero(float* y, std::size_t n) override {
        use();
        dev::fill_zero(y, float_bytes(n));
        wait();
    }

    void encode(const Compressor& q, const float* x, std::size_t n, const CodecKey& key,
                std::span<std::byte> out) override {
        use();
        const std::size_t bytes = q.encoded_bytes(n);
        if (out.size() < bytes)
            throw Error(fmt::format("cuda device: {} encoding needs {} bytes, the buffer holds {}",
                                    to_string(q.kind()), bytes, out.size()));
        std::memset(out.data() + bytes, 0, out.size() - bytes);  // as the CPU encode
        if (n == 0) return;
        const std::lock_guard lock(scratch_mutex_);
        std::byte* wire = scratch(bytes);
        codec(q.config(), n).encode(x, n, key, wire);
        wait();
        to_host(out.data(), wire, bytes);
    }

    void decode_add(const Compressor& q, std::span<const std::byte> in, const CodecKey& key,
                    float* y, std::size_t n) override {
        use();
        const std::size_t bytes = q.encoded_bytes(n);
        if (in.size() < bytes)
            throw Error(fmt::format("cuda device: a {} message of {} bytes, expected {}",
                                    to_string(q.kind()), in.size(), bytes));
        if (n == 0) return;
        const std::lock_guard lock(scratch_mutex_);
        std::byte* wire = scratch(bytes);
        to_device(wire, in.data(), bytes);
        codec(q.config(), n).decode_add(wire, key, y, n);
        wait();
    }

  private:
    void wait() { dev::synchronize(nullptr, options_.timeout); }
    // The device of the thread that made this one (the user's), on whichever thread calls.
    void use() { dev::set_current_device(device_); }

    // Host -> device: one cudaMemcpy for small payloads (waited for: from pageable memory it
    // may return before the DMA has landed); larger ones through the pinned chunks of
    // DeviceStaging, filling chunk i + 1 while chunk i goes up. Staging copies on its own
    // non-blocking stream: the default stream's work (which may still read dst) is waited for
    // first.
    void to_device(void* dst, const void* src, std::size_t bytes) {
        if (bytes == 0) return;
        if (bytes < options_.staging_min_bytes) {
            dev::copy_to_device(dst, src, bytes);
            return wait();
        }
        wait();
        const std::lock_guard lock(staging_mutex_);
        staging().receive_to_device(dst, bytes, [&](std::span<std::byte> chunk, std::size_t at) {
            std::memcpy(chunk.data(), static_cast<const std::byte*>(src) + at, chunk.size());
        });
    }

    void to_host(void* dst, const void* src, std::size_t bytes) {
        if (bytes == 0) return;
        if (bytes < options_.staging_min_bytes) return dev::copy_to_host(dst, src, bytes);
        const std::lock_guard lock(staging_mutex_);
        staging().send_from_device(
            src, bytes, [&](std::span<const std::byte> chunk, std::size_t at) {
                std::memcpy(static_cast<std::byte*>(dst) + at, chunk.data(), chunk.size());
            });
    }

    // Pinned slots are allocated at the first large transfer, not by every device.
    dev::DeviceStaging& staging() {
        if (!staging_) {
            dev::DeviceStaging::Options o;
            o.timeout = options_.timeout;
            staging_.emplace(o);
        }
        return *staging_;
    }

    // Device scratch of at least `bytes` (grown, never shrunk). Caller holds scratch_mutex_.
    std::byte* scratch(std::size_t bytes) {
        if (scratch_.size() < bytes) {
            scratch_ = dev::DeviceBuffer();  // free first: the old and new need not fit together
            scratch_ = dev::DeviceBuffer(bytes);
        }
        return scratch_.as<std::byte>();
    }

    // The DeviceCodec of a compressor configuration, for vectors of at least n values (rebuilt
    // larger when a longer vector comes). Caller holds scratch_mutex_.
    DeviceCodec& codec(const CompressorConfig& config, std::size_t n) {
        for (auto& c : codecs_) {
            if (!same_config(c.config, config)) continue;
            if (n > c.capacity) {
                c.codec.reset();  // its scratch goes before the larger one is allocated
                c.codec = std::make_unique<DeviceCodec>(config, n);
                c.capacity = n;
            }
            return *c.codec;
        }
        codecs_.push_back({config, n, std::make_unique<DeviceCodec>(config, n)});
        return *codecs_.back().codec;
    }

    const CudaDeviceOptions options_;
    const std::string description_;
    const int device_;

    std::mutex allocations_mutex_;
    std::unordered_map<float*, dev::DeviceBuffer> allocations_;

    std::mutex scratch_mutex_;  // before staging_mutex_ when both are held
    dev::DeviceBuffer scratch_;
    struct CachedCodec {
        CompressorConfig config;
        std::size_t capacity = 0;
        std::unique_ptr<DeviceCodec> codec;
    };
    std::vector<CachedCodec> codecs_;  // a handful of configurations: searched in order

    std::mutex staging_mutex_;
    std::optional<dev::DeviceStaging> staging_;
};

}  // namespace

std::shared_ptr<proto::Device> make_cuda_device(const CudaDeviceOptions& options) {
    if (dev::device_count() == 0)
        throw Error(dev::device_description() + "; use device \"cpu\"");  // "no CUDA device: ..."
    return std::make_shared<CudaDevice>(options);
}

}  // namespace gossamer::optim::cuda
