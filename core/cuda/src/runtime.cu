// Device discovery, memory, copies and waits with deadlines (see runtime.hpp).
#include <algorithm>
#include <thread>
#include <utility>

#include "check.cuh"
#include "gossamer/cuda/runtime.hpp"

namespace gossamer::cuda {

using detail::check;

int device_count() noexcept {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();  // clear the sticky "no device" error for later calls
        return 0;
    }
    return n;
}

std::string device_description() {
    int n = 0;
    const cudaError_t status = cudaGetDeviceCount(&n);
    if (status != cudaSuccess) {
        cudaGetLastError();
        return std::string("no CUDA device: ") + cudaGetErrorString(status);
    }
    if (n == 0) return "no CUDA device: the runtime reports 0 devices";
    cudaDeviceProp p{};
    check(cudaGetDeviceProperties(&p, 0), "cudaGetDeviceProperties");
    const double gib = static_cast<double>(p.totalGlobalMem) / (1u << 30);
    return std::string(p.name) + " (sm_" + std::to_string(p.major * 10 + p.minor) + ", " +
           std::to_string(p.multiProcessorCount) + " SMs, " +
           std::to_string(static_cast<int>(gib * 10) / 10) + "." +
           std::to_string(static_cast<int>(gib * 10) % 10) + " GiB)";
}

int current_device() {
    int device = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    return device;
}

void set_current_device(int device) {
    check(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
}

int multiprocessor_count() {
    static const int sms = [] {
        int device = 0, count = 0;
        check(cudaGetDevice(&device), "cudaGetDevice");
        check(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device),
              "cudaDeviceGetAttribute(multiProcessorCount)");
        return std::max(count, 1);
    }();
    return sms;
}

namespace detail {
unsigned grid_for(std::size_t work) {
    const std::size_t blocks = (work + kThreads - 1) / kThreads;
    const std::size_t cap = static_cast<std::size_t>(multiprocessor_count()) * 16;
    return static_cast<unsigned>(std::clamp<std::size_t>(blocks, 1, cap));
}
}  // namespace detail

namespace {
// Polls an event until it completes or the deadline passes; a blocking cudaEventSynchronize
// would have no deadline.
void wait_event(cudaEvent_t event, std::chrono::milliseconds timeout, const std::string& what) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (int spins = 0;; ++spins) {
        const cudaError_t s = cudaEventQuery(event);
        if (s == cudaSuccess) return;
        if (s != cudaErrorNotReady) check(s, what);
        if (std::chrono::steady_clock::now() > deadline)
            throw Timeout(what + ": not done after " + std::to_string(timeout.count()) + " ms");
        if (spins > 64) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
}
}  // namespace

void synchronize(void* stream, std::chrono::milliseconds timeout) {
    cudaEvent_t e{};
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
    try {
        check(cudaEventRecord(e, detail::as_stream(stream)), "cudaEventRecord");
        wait_event(e, timeout, "waiting for the CUDA stream");
    } catch (...) {
        cudaEventDestroy(e);
        throw;
    }
    cudaEventDestroy(e);
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    if (bytes == 0) return;
    check(cudaMalloc(&data_, bytes), "cudaMalloc(" + std::to_string(bytes) + " bytes)");
}

DeviceBuffer::~DeviceBuffer() {
    if (data_) cudaFree(data_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
        if (data_) cudaFree(data_);
        data_ = std::exchange(other.data_, nullptr);
        bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
}

void copy_to_device(void* dst, const void* src, std::size_t bytes) {
    if (bytes) check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
}
void copy_to_host(void* dst, const void* src, std::size_t bytes) {
    if (bytes) check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
}
void copy_device(void* dst, const void* src, std::size_t bytes, void* stream) {
    if (bytes)
        check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, detail::as_stream(stream)),
              "cudaMemcpyAsync device to device");
}
void fill_zero(void* dst, std::size_t bytes, void* stream) {
    if (bytes) check(cudaMemsetAsync(dst, 0, bytes, detail::as_stream(stream)), "cudaMemsetAsync");
}

double seconds_per_call(void (*work)(void*), void* context, int repeats, void* stream) {
    const cudaStream_t s = detail::as_stream(stream);
    work(context);  // warm-up: first-launch costs stay out of the figure
    cudaEvent_t start{}, stop{};
    check(cudaEventCreate(&start), "cudaEventCreate");
    check(cudaEventCreate(&stop), "cudaEventCreate");
    float ms = 0;
    try {
        check(cudaEventRecord(start, s), "cudaEventRecord");
        for (int r = 0; r < repeats; ++r) work(context);
        check(cudaEventRecord(stop, s), "cudaEventRecord");
        wait_event(stop, kDefaultWait, "timing a kernel");
        check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    } catch (...) {
        cudaEventDestroy(start);
        cudaEventDestroy(stop);
        throw;
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return static_cast<double>(ms) * 1e-3 / std::max(repeats, 1);
}

}  // namespace gossamer::cuda
