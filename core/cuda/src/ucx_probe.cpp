// Whether the UCX build here moves CUDA memory, from `ucx_info -d`: the manual check of
// docs/operations/gpu.md, for builds without the UCX backend. Where Gossamer links UCX, UCP's own
// answer decides (transport::query_ucx_memory_types(); no UCX header outside transport/ucx/,
// DESIGN.md).
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include "gossamer/cuda/staging.hpp"

namespace gossamer::cuda {

namespace {
std::string_view trim(std::string_view s) {
    const auto b = s.find_first_not_of(" #\t");
    if (b == std::string_view::npos) return {};
    const auto e = s.find_last_not_of(" \t\r");
    return s.substr(b, e - b + 1);
}
}  // namespace

UcxMemorySupport parse_ucx_info(std::string_view text) {
    static constexpr std::array<std::string_view, 4> kCudaNames = {"cuda_copy", "cuda_cpy",
                                                                   "cuda_ipc", "gdr_copy"};
    while (!text.empty()) {
        const auto nl = text.find('\n');
        const std::string_view line = trim(text.substr(0, nl));
        text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
        const bool names_something = line.starts_with("Memory domain:") ||
                                     line.starts_with("Component:") ||
                                     line.starts_with("Transport:");
        if (names_something) {
            for (auto name : kCudaNames)
                if (line.find(name) != std::string_view::npos) return {true, std::string(line)};
        }
        if (line.starts_with("memory types:") && line.find("cuda") != std::string_view::npos)
            return {true, std::string(line)};
    }
    return {};
}

UcxMemorySupport probe_ucx_memory(std::chrono::seconds timeout) {
    // coreutils' timeout bounds the wait; stderr is dropped (no UCX: the shell's one line).
    const std::string cmd =
        "timeout " + std::to_string(timeout.count()) + " ucx_info -d 2>/dev/null";
    FILE* pipe = popen(cmd.c_str(), "r");
    if (!pipe) return {};
    std::string out;
    std::array<char, 4096> buf{};
    for (std::size_t got; (got = std::fread(buf.data(), 1, buf.size(), pipe)) > 0;)
        out.append(buf.data(), got);
    pclose(pipe);
    return parse_ucx_info(out);
}

const char* transfer_path(const UcxMemorySupport& support) noexcept {
    return support.cuda ? "ucx-cuda" : "staging";
}

}  // namespace gossamer::cuda
