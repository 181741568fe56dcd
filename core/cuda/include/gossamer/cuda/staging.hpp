#pragma once
/// Moving device buffers between peers (docs/operations/gpu.md, "Which transfer path runs").
///
/// Debian's UCX has no CUDA memory support, so a device buffer travels through pinned host
/// memory: DeviceStaging cuts it into chunks and overlaps the device<->host copy of one chunk
/// with the transport's work on the previous one (double buffering on its own stream). Where
/// the UCX build handles CUDA memory, device pointers can go to UCX directly and no staging is
/// needed: the run-time decision asks UCP (transport::query_ucx_memory_types() and
/// transport::device_transfer_path() in gossamer/transport/ucx.hpp; core/cuda sees no transport).
///
/// Threading: one DeviceStaging serves one caller thread at a time (the communication loop).

#include <chrono>
#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gossamer::cuda {

/// One chunk of a staged transfer: bytes [offset, offset + size) through pinned slot `slot`.
struct StagedChunk {
    std::size_t offset = 0, size = 0;
    int slot = 0;
};

/// The chunks of a transfer of `bytes` through `slots` pinned buffers of `chunk_bytes`: in
/// order, every chunk full but the last, slots taken round robin. Error when chunk_bytes or
/// slots is 0. Pure: what DeviceStaging follows, testable without a device.
std::vector<StagedChunk> staging_plan(std::size_t bytes, std::size_t chunk_bytes, int slots);

class DeviceStaging {
  public:
    struct Options {
        std::size_t chunk_bytes = std::size_t{4} << 20;  ///< per pinned slot
        int slots = 2;                                   ///< 2: double buffering
        std::chrono::milliseconds timeout{30000};        ///< per chunk copy
    };
    /// Pinned host slots (cudaHostAlloc) and a non-blocking stream; Error when either fails.
    explicit DeviceStaging(Options options);
    DeviceStaging() : DeviceStaging(Options{}) {}
    ~DeviceStaging();
    DeviceStaging(const DeviceStaging&) = delete;
    DeviceStaging& operator=(const DeviceStaging&) = delete;

    /// Receives each chunk of a device buffer in order; it must be done with the bytes (sent or
    /// copied them) when it returns, because the slot is refilled afterwards.
    using ChunkSink = std::function<void(std::span<const std::byte> chunk, std::size_t offset)>;
    /// Fills each pinned chunk in order (e.g. from a received message) before it goes up.
    using ChunkSource = std::function<void(std::span<std::byte> chunk, std::size_t offset)>;

    /// Device -> host: the copy of chunk i+1 runs while `sink` handles chunk i. The copies start
    /// after all work queued on the default stream and blocking streams (what wrote src); work
    /// on a non-blocking stream must be synchronized by the caller first. Throws Timeout
    /// when one chunk's copy takes longer than options.timeout, Error when a copy fails.
    void send_from_device(const void* device_src, std::size_t bytes, const ChunkSink& sink);
    /// Host -> device: `source` fills chunk i+1 while chunk i is copied up. Returns when the
    /// last chunk is on the device. Same errors.
    void receive_to_device(void* device_dst, std::size_t bytes, const ChunkSource& source);

    const Options& options() const noexcept { return options_; }

  private:
    void wait_slot(int slot, const char* what);
    void wait_all(const char* what);
    void release() noexcept;
    Options options_;
    std::vector<std::byte*> pinned_;
    std::vector<void*> done_;  // one cudaEvent_t per slot
    void* stream_ = nullptr;   // cudaStream_t
};

/// The manual check (docs/operations/gpu.md): whether a UCX build can move CUDA memory, from the
/// text `ucx_info -d` prints: a memory domain or transport named cuda_copy / cuda_cpy / cuda_ipc /
/// gdr_copy, or "memory types" that list cuda. `evidence` quotes the line that decided it (empty
/// when none did). Where Gossamer links UCX, UCP's own answer decides instead (see above); this
/// serves builds without the UCX backend (scripts/gpu_check.sh's bench) and tests the docs' check.
struct UcxMemorySupport {
    bool cuda = false;
    std::string evidence;
};
UcxMemorySupport parse_ucx_info(std::string_view ucx_info_d_output);
/// Runs `ucx_info -d` (at most `timeout`) and parses it; cuda = false when it cannot run.
UcxMemorySupport probe_ucx_memory(std::chrono::seconds timeout = std::chrono::seconds(5));

/// The path `ucx_info -d`'s answer implies: "ucx-cuda" (UCX moves device memory) or "staging"
/// (pinned host buffers, the default and the only path with Debian's UCX).
const char* transfer_path(const UcxMemorySupport& support) noexcept;

}  // namespace gossamer::cuda
