// gossamer launch --trace: the peers' timelines merged into one file (docs/formats/trace.md).
#include <fmt/format.h>

#include <filesystem>

#include "gossamer/core/trace.hpp"
#include "gossamer/launch/launch.hpp"

namespace gossamer::launch {

std::filesystem::path peer_trace_path(const LaunchJob& job, const std::string& algorithm, int r) {
    return job.out / algorithm / fmt::format("peer{}.trace.json", r);
}

std::optional<std::string> merge_peer_traces(const LaunchJob& job, const std::string& algorithm) {
    if (!job.trace) return std::nullopt;
    std::vector<std::string> files;
    std::error_code ec;
    for (int r = 0; r < job.topology.n(); ++r) {
        const auto path = peer_trace_path(job, algorithm, r);
        if (std::filesystem::exists(path, ec)) files.push_back(path.string());
    }
    if (files.empty()) return std::nullopt;
    const std::string out =
        job.trace_per_algorithm ? trace::tagged_path(*job.trace, algorithm) : *job.trace;
    trace::merge_files(files, out);
    return out;
}

}  // namespace gossamer::launch
