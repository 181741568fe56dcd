#include "trace_cost.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <limits>

#include "gossamer/core/metrics.hpp"
#include "gossamer/core/trace.hpp"

namespace gossamer::bench {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

TraceCostReport run_trace_cost(const TraceCostOptions& o) {
    namespace fs = std::filesystem;
    const fs::path dir = o.dir.empty() ? fs::temp_directory_path() /
                                             fmt::format("gossamer-bench-trace-{}", ::getpid())
                                       : fs::path(o.dir);
    fs::create_directories(dir);
    TraceCostReport rep;
    rep.events = o.events / 32 * 32;
    double best_record = std::numeric_limits<double>::infinity();
    double best_write = best_record, best_line = best_record;
    const std::int64_t per_peer = o.events / 4 / 8;  // 8 peers, 4 events a step
    for (int k = 0; k < o.repeats; ++k) {
        // Recording: the limit holds every event, so this is the steady cost of an append.
        trace::Recorder rec("virtual",
                            static_cast<std::size_t>(2 * o.events + 64) * trace::kMaxEventBytes);
        auto t0 = Clock::now();
        for (std::int64_t s = 0; s < per_peer; ++s)
            for (int p = 0; p < 8; ++p) {
                const double t = static_cast<double>(s) * 0.01;
                rec.wait(p, t, t + 0.001, {trace::WaitCause::message, (p + 1) % 8, s});
                rec.receive(p, t + 0.001, (p + 1) % 8, 40088, s, 2);
                rec.step(p, t + 0.001, t + 0.01, s, 0.5);
                rec.send(p, t + 0.01, (p + 7) % 8, 40088, s, 2);
            }
        const double recorded = static_cast<double>(per_peer * 8 * 4);
        best_record = std::min(best_record, since(t0) * 1e9 / recorded);
        const auto path = (dir / "bench.trace.json").string();
        t0 = Clock::now();
        rec.write(path);
        best_write = std::min(best_write, since(t0) * 1e9 / recorded);
        rep.file_bytes = fs::file_size(path);
        fs::remove(path);
        // The reference: a peer's per-step metrics line, written and flushed.
        {
            MetricsWriter m((dir / "bench.jsonl").string());
            t0 = Clock::now();
            for (std::int64_t i = 0; i < o.lines; ++i)
                m.write({{"rank", 3},
                         {"step", i},
                         {"time", static_cast<double>(i) * 0.01},
                         {"loss", 0.5},
                         {"step_seconds", 0.01}});
            best_line = std::min(best_line, since(t0) * 1e9 / static_cast<double>(o.lines));
        }
        fs::remove(dir / "bench.jsonl");
    }
    if (o.dir.empty()) fs::remove_all(dir);
    rep.record_ns = best_record;
    rep.write_ns = best_write;
    rep.metrics_line_ns = best_line;
    return rep;
}

json::Json TraceCostReport::to_json() const {
    return {{"record_ns_per_event", record_ns},
            {"write_ns_per_event", write_ns},
            {"metrics_line_ns", metrics_line_ns},
            {"ratio_record_to_metrics_line", record_ns / metrics_line_ns},
            {"ratio_record_and_write_to_metrics_line", (record_ns + write_ns) / metrics_line_ns},
            {"events", events},
            {"file_bytes", file_bytes},
            {"bytes_per_event", static_cast<double>(file_bytes) / static_cast<double>(events)}};
}

std::string TraceCostReport::to_text() const {
    return fmt::format(
        "{:<34} {:>10.1f} ns\n{:<34} {:>10.1f} ns\n{:<34} {:>10.1f} ns\n"
        "ratio: one event recorded = {:.3f} metrics lines ({:.3f} with writing the file); "
        "{:.0f} bytes per event in the file\n",
        "record one event", record_ns, "write one event (at the end)", write_ns,
        "write one metrics line (reference)", metrics_line_ns, record_ns / metrics_line_ns,
        (record_ns + write_ns) / metrics_line_ns,
        static_cast<double>(file_bytes) / static_cast<double>(events));
}

}  // namespace gossamer::bench
