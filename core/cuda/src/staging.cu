// Staged device <-> host transfers through pinned slots, one chunk in flight per slot.
#include <algorithm>
#include <thread>

#include "check.cuh"
#include "gossamer/cuda/staging.hpp"

namespace gossamer::cuda {

using detail::check;

std::vector<StagedChunk> staging_plan(std::size_t bytes, std::size_t chunk_bytes, int slots) {
    if (chunk_bytes == 0 || slots < 1)
        throw Error("staging: chunk_bytes and slots must be at least 1 (got " +
                    std::to_string(chunk_bytes) + " and " + std::to_string(slots) + ")");
    std::vector<StagedChunk> plan;
    plan.reserve((bytes + chunk_bytes - 1) / chunk_bytes);
    for (std::size_t offset = 0; offset < bytes; offset += chunk_bytes)
        plan.push_back({offset, std::min(chunk_bytes, bytes - offset),
                        static_cast<int>(plan.size() % static_cast<std::size_t>(slots))});
    return plan;
}

DeviceStaging::DeviceStaging(Options options) : options_(options) {
    staging_plan(0, options_.chunk_bytes, options_.slots);  // validates the options
    try {
        cudaStream_t s{};
        check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "staging: cudaStreamCreate");
        stream_ = s;
        for (int i = 0; i < options_.slots; ++i) {
            void* p = nullptr;
            check(cudaHostAlloc(&p, options_.chunk_bytes, cudaHostAllocDefault),
                  "staging: cudaHostAlloc(" + std::to_string(options_.chunk_bytes) + " bytes)");
            pinned_.push_back(static_cast<std::byte*>(p));
            cudaEvent_t e{};
            check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "staging: cudaEventCreate");
            done_.push_back(e);
        }
    } catch (...) {
        release();
        throw;
    }
}

DeviceStaging::~DeviceStaging() {
    release();
}

void DeviceStaging::release() noexcept {
    if (stream_) cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
    for (void* e : done_) cudaEventDestroy(static_cast<cudaEvent_t>(e));
    for (std::byte* p : pinned_) cudaFreeHost(p);
    if (stream_) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
    done_.clear();
    pinned_.clear();
    stream_ = nullptr;
}

// Polls the slot's event: a blocking cudaEventSynchronize would have no deadline.
void DeviceStaging::wait_slot(int slot, const char* what) {
    const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
    auto e = static_cast<cudaEvent_t>(done_[static_cast<std::size_t>(slot)]);
    for (int spins = 0;; ++spins) {
        const cudaError_t s = cudaEventQuery(e);
        if (s == cudaSuccess) return;
        if (s != cudaErrorNotReady) check(s, std::string("staging: ") + what);
        if (std::chrono::steady_clock::now() > deadline)
            throw Timeout(std::string("staging: ") + what + " of one chunk took longer than " +
                          std::to_string(options_.timeout.count()) + " ms");
        if (spins > 64) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
}

// A transfer that a sink or source left by throwing may still have copies in flight: the slots
// are free again only when they are done.
void DeviceStaging::wait_all(const char* what) {
    for (int slot = 0; slot < options_.slots; ++slot) wait_slot(slot, what);
}

void DeviceStaging::send_from_device(const void* src, std::size_t bytes, const ChunkSink& sink) {
    const auto plan = staging_plan(bytes, options_.chunk_bytes, options_.slots);
    wait_all("finishing an earlier transfer");
    const auto s = static_cast<cudaStream_t>(stream_);
    const auto* from = static_cast<const std::byte*>(src);
    auto issue = [&](const StagedChunk& c) {
        const auto slot = static_cast<std::size_t>(c.slot);
        check(cudaMemcpyAsync(pinned_[slot], from + c.offset, c.size, cudaMemcpyDeviceToHost, s),
              "staging: cudaMemcpyAsync to host");
        check(cudaEventRecord(static_cast<cudaEvent_t>(done_[slot]), s),
              "staging: cudaEventRecord");
    };
    // The copies run on a non-blocking stream, which does not wait for the legacy default
    // stream by itself: order them after everything already queued there (and so on every
    // blocking stream), which is where the kernels that wrote src ran.
    auto ready = static_cast<cudaEvent_t>(done_[0]);
    check(cudaEventRecord(ready, cudaStreamLegacy), "staging: cudaEventRecord");
    check(cudaStreamWaitEvent(s, ready, 0), "staging: cudaStreamWaitEvent");
    // Keep `slots` copies queued; hand each chunk over as soon as its copy is done, then reuse
    // its slot for the chunk `slots` places later.
    const std::size_t depth = static_cast<std::size_t>(options_.slots);
    for (std::size_t i = 0; i < std::min(depth, plan.size()); ++i) issue(plan[i]);
    for (std::size_t i = 0; i < plan.size(); ++i) {
        const StagedChunk& c = plan[i];
        wait_slot(c.slot, "copying to host");
        sink({pinned_[static_cast<std::size_t>(c.slot)], c.size}, c.offset);
        if (i + depth < plan.size()) issue(plan[i + depth]);
    }
}

void DeviceStaging::receive_to_device(void* dst, std::size_t bytes, const ChunkSource& source) {
    const auto plan = staging_plan(bytes, options_.chunk_bytes, options_.slots);
    wait_all("finishing an earlier transfer");
    const auto s = static_cast<cudaStream_t>(stream_);
    auto* to = static_cast<std::byte*>(dst);
    const std::size_t depth = static_cast<std::size_t>(options_.slots);
    for (std::size_t i = 0; i < plan.size(); ++i) {
        const StagedChunk& c = plan[i];
        const auto slot = static_cast<std::size_t>(c.slot);
        if (i >= depth) wait_slot(c.slot, "copying to the device");  // the slot's last copy
        source({pinned_[slot], c.size}, c.offset);
        check(cudaMemcpyAsync(to + c.offset, pinned_[slot], c.size, cudaMemcpyHostToDevice, s),
              "staging: cudaMemcpyAsync to device");
        check(cudaEventRecord(static_cast<cudaEvent_t>(done_[slot]), s),
              "staging: cudaEventRecord");
    }
    for (std::size_t i = plan.size() > depth ? plan.size() - depth : 0; i < plan.size(); ++i)
        wait_slot(plan[i].slot, "copying to the device");
}

}  // namespace gossamer::cuda
