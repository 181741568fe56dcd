// Finding a job's checkpoints and the one step every peer resumes from
// (docs/operations/checkpoint.md).
#include "gossamer/peer/checkpoints.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "gossamer/core/error.hpp"

namespace gossamer::peer {
namespace fs = std::filesystem;

fs::path checkpoint_path(const fs::path& dir, int rank, std::int64_t step) {
    return dir / fmt::format("checkpoint-{}-{}.state", rank, step);
}

namespace {

// "checkpoint-<R>-<S>.state" -> (R, S); nullopt for any other name.
std::optional<std::pair<int, std::int64_t>> parse_name(const std::string& name) {
    constexpr std::string_view head = "checkpoint-", tail = ".state";
    if (name.size() <= head.size() + tail.size() || name.rfind(head, 0) != 0 ||
        name.compare(name.size() - tail.size(), tail.size(), tail) != 0)
        return std::nullopt;
    const char* p = name.data() + head.size();
    const char* end = name.data() + name.size() - tail.size();
    int rank = -1;
    std::int64_t step = -1;
    auto r = std::from_chars(p, end, rank);
    if (r.ec != std::errc() || r.ptr == end || *r.ptr != '-') return std::nullopt;
    auto s = std::from_chars(r.ptr + 1, end, step);
    if (s.ec != std::errc() || s.ptr != end || rank < 0 || step <= 0) return std::nullopt;
    return std::pair{rank, step};
}

std::string steps_text(const std::vector<std::int64_t>& steps) {
    std::string out;
    const std::size_t shown = std::min<std::size_t>(steps.size(), 6);
    for (std::size_t i = steps.size() - shown; i < steps.size(); ++i)
        out += fmt::format("{}{}", out.empty() ? "" : " ", steps[i]);
    return steps.size() > shown ? "... " + out : out;
}

}  // namespace

std::map<int, std::vector<std::int64_t>> list_checkpoints(const fs::path& dir, int n) {
    std::map<int, std::vector<std::int64_t>> out;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const auto parsed = parse_name(it->path().filename().string());
        if (!parsed || parsed->first >= n) continue;
        out[parsed->first].push_back(parsed->second);
    }
    for (auto& [rank, steps] : out) std::sort(steps.begin(), steps.end());
    return out;
}

std::int64_t own_resume_step(const fs::path& dir, int n, int rank,
                             std::optional<std::int64_t> wanted, const std::string& flag) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
        throw ConfigError("", flag, fmt::format("{} is not a folder", dir.string()),
                          "give the folder this peer wrote its checkpoints to");
    const auto all = list_checkpoints(dir, n);
    const auto it = all.find(rank);
    if (it == all.end())
        throw ConfigError(
            "", flag,
            fmt::format("{} holds no checkpoint of rank {} (checkpoint-{}-<step>.state)",
                        dir.string(), rank, rank),
            "rejoin from the folder this rank wrote with --checkpoint-every, or --join without "
            "--resume to take a sponsor's model");
    if (!wanted) return it->second.back();
    if (!std::binary_search(it->second.begin(), it->second.end(), *wanted))
        throw ConfigError("", flag,
                          fmt::format("step {} is not held by rank {} in {} (rank {}: {})", *wanted,
                                      rank, dir.string(), rank, steps_text(it->second)),
                          "give a step this rank holds, or drop --resume-step for its newest");
    return *wanted;
}

std::int64_t resume_step(const fs::path& dir, int n, int rank, std::optional<std::int64_t> wanted,
                         const std::string& flag) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
        throw ConfigError("", flag, fmt::format("{} is not a folder", dir.string()),
                          "give the output folder of the stopped job");
    const auto all = list_checkpoints(dir, n);
    std::vector<int> ranks;
    if (rank < 0) {
        for (int q = 0; q < n; ++q) ranks.push_back(q);
    } else {
        for (const auto& [q, steps] : all) ranks.push_back(q);
        if (!all.contains(rank))
            ranks.insert(std::lower_bound(ranks.begin(), ranks.end(), rank), rank);
    }
    for (int q : ranks)
        if (!all.contains(q))
            throw ConfigError(
                "", flag,
                fmt::format("{} holds no checkpoint of rank {} (checkpoint-{}-<step>.state)",
                            dir.string(), q, q),
                "resume from the folder the job wrote with --checkpoint-every, or "
                "start it afresh");
    // The steps every rank considered holds.
    std::vector<std::int64_t> common = all.at(ranks.front());
    for (int q : ranks) {
        std::vector<std::int64_t> both;
        std::set_intersection(common.begin(), common.end(), all.at(q).begin(), all.at(q).end(),
                              std::back_inserter(both));
        common = std::move(both);
    }
    std::string held;
    for (int q : ranks)
        held += fmt::format("{}rank {}: {}", held.empty() ? "" : "; ", q, steps_text(all.at(q)));
    if (wanted) {
        if (!std::binary_search(common.begin(), common.end(), *wanted))
            throw ConfigError("", flag,
                              fmt::format("step {} is not held by every peer in {} ({})", *wanted,
                                          dir.string(), held),
                              "give a step every rank holds");
        return *wanted;
    }
    if (common.empty())
        throw ConfigError(
            "", flag,
            fmt::format("no checkpoint step that every peer holds in {} ({})", dir.string(), held),
            "the job cannot resume from this folder; start it afresh");
    return common.back();
}

}  // namespace gossamer::peer
