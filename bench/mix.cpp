#include "mix.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <string>

#include "gossamer/core/error.hpp"
#include "gossamer/core/finite.hpp"
#include "gossamer/core/params.hpp"
#include "gossamer/core/units.hpp"

namespace gossamer::bench {
namespace {

// MemAvailable from /proc/meminfo (free memory plus what the kernel can drop), else free pages.
std::size_t available_memory() {
    std::ifstream in("/proc/meminfo");
    std::string key;
    std::size_t kib = 0;
    while (in >> key >> kib) {
        if (key == "MemAvailable:") return kib * 1024;
        in.ignore(1 << 10, '\n');
    }
    const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * page : 0;
}

template <class F>
double seconds(F&& f) {
    const auto start = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

std::size_t last_level_cache_bytes() {
    const long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    return llc > 0 ? static_cast<std::size_t>(llc) : std::size_t{32} << 20;
}

std::size_t default_mix_bytes(int max_neighbours, bool& capped) {
    constexpr std::size_t MiB = std::size_t{1} << 20;
    std::size_t bytes = std::max<std::size_t>(128 * MiB, 4 * last_level_cache_bytes());
    const std::size_t budget = available_memory() / 2 / (max_neighbours + 1);
    capped = budget > 0 && bytes > budget;
    if (capped) bytes = std::max(MiB, budget);
    return bytes / MiB * MiB;
}

MixReport run_mix(const MixOptions& o) {
    const Mixer mixer(o.isa, o.stores);  // throws when the path does not run here
    MixReport report;
    report.bytes = o.bytes;
    if (report.bytes == 0) report.bytes = default_mix_bytes(o.max_neighbours, report.capped);
    report.llc_bytes = last_level_cache_bytes();
    report.isa = to_string(o.isa);
    report.stores = to_string(o.stores);
    report.repeats = o.repeats;
    const std::size_t n = std::max<std::size_t>(1, report.bytes / sizeof(float));
    report.bytes = n * sizeof(float);
    report.streaming = mixer.streams(n, true);

    // bufs[0] is x (and memcpy's destination), bufs[1..] the neighbours (bufs[1] memcpy's
    // source). All hold 1.0 and the weights sum to 1, so values stay normal (no slow denormals).
    // Filling touches every page before anything is timed.
    std::vector<ParamVector> bufs;
    for (int j = 0; j <= o.max_neighbours; ++j) {
        bufs.emplace_back(n);
        bufs.back().fill(1.0f);
    }
    const double s = static_cast<double>(report.bytes);
    for (int k = 1; k <= o.max_neighbours; ++k) {
        if (o.progress) o.progress(fmt::format("bench mix: k = {} of {}", k, o.max_neighbours));
        std::vector<MixTerm> terms;
        const float w = 1.0f / static_cast<float>(k + 1);
        for (int j = 1; j <= k; ++j) terms.push_back({bufs[j].span(), w});
        auto run_mix_once = [&] { mixer.mix(bufs[0], w, terms); };
        auto run_memcpy_once = [&] { std::memcpy(bufs[0].data(), bufs[1].data(), report.bytes); };
        // The check a receiver makes of one neighbour's message before it mixes it in
        // (docs/operations/reliability.md, "Non-finite values"): one read of S bytes.
        bool finite = true;
        auto run_check_once = [&] { finite = finite && !first_non_finite(bufs[1].span()); };
        run_mix_once();  // warm-up: TLB, prefetchers, frequency
        run_memcpy_once();
        run_check_once();
        // Alternate the two sides so that a load spike from elsewhere hits both alike; keep
        // the best time of each, as STREAM does.
        double best_mix = 1e300, best_copy = 1e300, best_check = 1e300;
        for (int r = 0; r < o.repeats; ++r) {
            best_mix = std::min(best_mix, seconds(run_mix_once));
            best_copy = std::min(best_copy, seconds(run_memcpy_once));
            best_check = std::min(best_check, seconds(run_check_once));
        }
        if (!finite)
            throw Error("bench mix: the finiteness check found a non-finite value in 1.0s");
        MixRow row;
        row.neighbours = k;
        row.mix = (k + 2) * s / best_mix / 1e9;
        row.memcpy = 2 * s / best_copy / 1e9;
        row.check_seconds = best_check;
        row.mix_seconds = best_mix;
        report.rows.push_back(row);
    }
    return report;
}

json::Json MixReport::to_json() const {
    json::Json j = {{"bytes_per_buffer", bytes},
                    {"llc_bytes", llc_bytes},
                    {"bytes_capped_by_memory", capped},
                    {"isa", isa},
                    {"stores", stores},
                    {"streaming_stores", streaming},
                    {"repeats", repeats},
                    {"statistic", "best"},
                    {"rows", json::Json::array()}};
    for (const auto& r : rows) {
        j["rows"].push_back({{"neighbours", r.neighbours},
                             {"mix_gb_per_s", r.mix},
                             {"memcpy_gb_per_s", r.memcpy},
                             {"ratio", r.mix / r.memcpy},
                             {"target_ratio", r.target},
                             {"check_seconds", r.check_seconds},
                             {"mix_seconds", r.mix_seconds},
                             {"check_share", r.check_seconds / r.mix_seconds},
                             {"target_check_share", r.check_target}});
    }
    return j;
}

std::string MixReport::to_text() const {
    std::string out = fmt::format(
        "mix bandwidth, one thread: x <- w*x + sum of k neighbours, (k+2)*S bytes per call, "
        "beside memcpy, 2*S bytes per call\nS = {} per buffer ({:.2f}x the {} last-level "
        "cache{}); {} kernels, {} stores; best of {}\n",
        format_bytes(static_cast<double>(bytes)), static_cast<double>(bytes) / llc_bytes,
        format_bytes(static_cast<double>(llc_bytes)),
        capped ? ", lowered to fit in memory: caches may inflate the figures" : "", isa,
        streaming ? "streaming" : "regular", repeats);
    out += fmt::format("{:>2} {:>14} {:>16} {:>7} {:>8}\n", "k", "mix [GB/s]", "memcpy [GB/s]",
                       "ratio", "target");
    for (const auto& r : rows) {
        const double ratio = r.mix / r.memcpy;
        out += fmt::format("{:>2} {:>14.2f} {:>16.2f} {:>7.2f} {:>8}  {}\n", r.neighbours, r.mix,
                           r.memcpy, ratio, fmt::format(">= {:.1f}", r.target),
                           ratio >= r.target ? "ok" : "BELOW TARGET");
    }
    out += "the non-finite check of one message (S bytes read) beside the mix of k messages:\n";
    out += fmt::format("{:>2} {:>11} {:>10} {:>10} {:>8}\n", "k", "check [ms]", "mix [ms]",
                       "check/mix", "target");
    for (const auto& r : rows) {
        const double share = r.check_seconds / r.mix_seconds;
        out += fmt::format("{:>2} {:>11.3f} {:>10.3f} {:>10.3f} {:>8}  {}\n", r.neighbours,
                           1e3 * r.check_seconds, 1e3 * r.mix_seconds, share,
                           fmt::format("<= {:.2f}", r.check_target),
                           share <= r.check_target ? "ok" : "ABOVE TARGET");
    }
    return out;
}

}  // namespace gossamer::bench
