#pragma once
/// The CUDA runtime as Gossamer uses it: device discovery, device memory (plain cudaMalloc,
/// never managed memory), copies and waits with a deadline. No CUDA type appears here, so CPU
/// code includes this header without the toolkit's headers; a stream is a cudaStream_t passed as
/// `void*` (nullptr: the legacy default stream).
///
/// Errors: every failing runtime call throws gossamer::Error naming the call and the CUDA error
/// ("cudaMalloc(268435456 bytes): out of memory"); a wait past its deadline throws
/// gossamer::Timeout naming what it waited for.

#include <chrono>
#include <cstddef>
#include <string>

namespace gossamer::cuda {

/// Devices usable here; 0 when there is none or no driver. Never throws.
int device_count() noexcept;
/// "NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)" for device 0, or why there is none
/// ("no CUDA device: CUDA driver version is insufficient for CUDA runtime version").
std::string device_description();
/// The calling thread's current device (cudaGetDevice; 0 unless the thread chose another).
int current_device();
/// Makes `device` the calling thread's current device (cudaSetDevice).
void set_current_device(int device);
/// Multiprocessors of the current device (cached after the first call); kernels size their
/// grids from it.
int multiprocessor_count();

/// Default deadline of the waits below.
inline constexpr std::chrono::milliseconds kDefaultWait{30000};

/// Waits until all work queued on `stream` has finished; throws Timeout past `timeout` and
/// Error when a kernel on it failed.
void synchronize(void* stream = nullptr, std::chrono::milliseconds timeout = kDefaultWait);

/// Device memory of a fixed size in bytes (cudaMalloc; freed by the destructor). Move-only.
/// The memory is not initialised; cudaMalloc aligns it to 256 bytes.
class DeviceBuffer {
  public:
    DeviceBuffer() = default;
    /// Throws Error when the device cannot allocate `bytes`.
    explicit DeviceBuffer(std::size_t bytes);
    ~DeviceBuffer();
    DeviceBuffer(DeviceBuffer&& other) noexcept;
    DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;

    void* data() const noexcept { return data_; }
    std::size_t size() const noexcept { return bytes_; }
    /// The memory as an array of T (device pointer: never dereference it on the host).
    template <class T>
    T* as() const noexcept {
        return static_cast<T*>(data_);
    }

  private:
    void* data_ = nullptr;
    std::size_t bytes_ = 0;
};

/// Host to device, device to host and device to device copies of `bytes`; synchronous with
/// respect to the host for host memory (cudaMemcpy), device to device is queued on `stream`.
void copy_to_device(void* device_dst, const void* host_src, std::size_t bytes);
void copy_to_host(void* host_dst, const void* device_src, std::size_t bytes);
void copy_device(void* device_dst, const void* device_src, std::size_t bytes,
                 void* stream = nullptr);
/// Sets `bytes` of device memory to zero, queued on `stream`.
void fill_zero(void* device_dst, std::size_t bytes, void* stream = nullptr);

/// Device time of `repeats` calls of `work` (which queues kernels on `stream`), in seconds per
/// call, measured with CUDA events around the whole batch after one untimed warm-up call.
double seconds_per_call(void (*work)(void* context), void* context, int repeats,
                        void* stream = nullptr);

}  // namespace gossamer::cuda
