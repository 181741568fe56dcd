// The emulated device (gossamer/optimizers/device.hpp): host pages that only its own calls can
// touch, so tests of the device code paths catch a host access of device memory where there is
// no GPU. The arithmetic is the CPU path's, so results are bit-identical to it.
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "gossamer/core/error.hpp"
#include "gossamer/core/mixing.hpp"
#include "gossamer/optimizers/protocol/device.hpp"

namespace gossamer::proto {
namespace {

std::size_t page_bytes(std::size_t n) {
    static const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    const std::size_t bytes = std::max<std::size_t>(n * sizeof(float), 1);
    return (bytes + page - 1) / page * page;
}

class EmulatedDevice final : public Device {
  public:
    ~EmulatedDevice() override {
        for (const auto& [p, bytes] : regions_) munmap(p, bytes);
    }
    std::string_view name() const noexcept override { return "emulated"; }
    std::string description() const override {
        return "emulated (host pages, inaccessible between device calls)";
    }

    float* allocate(std::size_t n) override {
        const std::size_t bytes = page_bytes(n);
        void* p = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            throw Error(fmt::format("emulated device: mmap of {} bytes failed: {}", bytes,
                                    std::strerror(errno)));
        std::lock_guard lock(mutex_);
        regions_.emplace(p, bytes);
        return static_cast<float*>(p);  // anonymous pages are zeroed
    }
    void deallocate(float* p, std::size_t) noexcept override {
        if (!p) return;
        std::lock_guard lock(mutex_);
        auto it = regions_.find(p);
        if (it == regions_.end()) return;
        munmap(it->first, it->second);
        regions_.erase(it);
    }

    void upload(float* dst, std::span<const float> src) override {
        Open open(*this);
        std::memcpy(dst, src.data(), src.size_bytes());
    }
    void upload_add(float* y, std::span<const float> src) override {
        Open open(*this);
        for (std::size_t k = 0; k < src.size(); ++k) y[k] += src[k];
    }
    void download(std::span<float> dst, const float* src) override {
        Open open(*this);
        std::memcpy(dst.data(), src, dst.size_bytes());
    }
    void copy(float* dst, const float* src, std::size_t n) override {
        Open open(*this);
        std::memcpy(dst, src, n * sizeof(float));
    }
    void mix(float* x, double w_self, std::span<const DeviceTerm> terms, std::size_t n) override {
        std::vector<gossamer::MixTerm> fused;
        fused.reserve(terms.size());
        for (const DeviceTerm& t : terms)
            fused.push_back({{t.values, n}, static_cast<float>(t.weight)});
        Open open(*this);
        gossamer::mix(std::span(x, n), static_cast<float>(w_self), fused);
    }
    void delta(float* d, const float* x, const float* x_hat, std::size_t n) override {
        Open open(*this);
        for (std::size_t k = 0; k < n; ++k) d[k] = x[k] - x_hat[k];
    }
    void axpy(float* y, float a, const float* x, std::size_t n) override {
        Open open(*this);
        for (std::size_t k = 0; k < n; ++k) y[k] += a * x[k];
    }
    void divide(float* y, float divisor, std::size_t n) override {
        Open open(*this);
        for (std::size_t k = 0; k < n; ++k) y[k] = y[k] / divisor;
    }
    void scale(float* y, double a, const float* x, std::size_t n) override {
        Open open(*this);
        for (std::size_t k = 0; k < n; ++k) y[k] = static_cast<float>(a * x[k]);
    }
    void debias(float* z, const float* x, double w, std::size_t n) override {
        Open open(*this);
        for (std::size_t k = 0; k < n; ++k) z[k] = static_cast<float>(x[k] / w);
    }
    void zero(float* y, std::size_t n) override {
        Open open(*this);
        std::fill(y, y + n, 0.0f);
    }
    void encode(const optim::Compressor& q, const float* x, std::size_t n,
                const optim::CodecKey& key, std::span<std::byte> out) override {
        Open open(*this);
        q.encode(std::span(x, n), key, out);
    }
    void decode_add(const optim::Compressor& q, std::span<const std::byte> in,
                    const optim::CodecKey& key, float* y, std::size_t n) override {
        Open open(*this);
        q.decode_add(in, key, std::span(y, n));
    }

  private:
    // One call at a time: the device's pages are readable and writable while it runs.
    class Open {
      public:
        explicit Open(EmulatedDevice& d) : d_(d), lock_(d.mutex_) {
            d_.protect(PROT_READ | PROT_WRITE);
        }
        ~Open() { d_.protect(PROT_NONE); }
        Open(const Open&) = delete;
        Open& operator=(const Open&) = delete;

      private:
        EmulatedDevice& d_;
        std::lock_guard<std::mutex> lock_;
    };
    void protect(int prot) {
        // mprotect of our own whole mappings fails only when the kernel runs out of memory for
        // the split mappings; the device cannot go on then (a destructor cannot throw).
        for (const auto& [p, bytes] : regions_)
            if (mprotect(p, bytes, prot) != 0) {
                std::fprintf(stderr, "emulated device: mprotect failed: %s\n",
                             std::strerror(errno));
                std::abort();
            }
    }

    std::mutex mutex_;
    std::map<void*, std::size_t> regions_;  // base -> mapped bytes
};

}  // namespace

std::shared_ptr<Device> emulated_device() {
    static const std::shared_ptr<Device> device = std::make_shared<EmulatedDevice>();
    return device;
}

}  // namespace gossamer::proto
