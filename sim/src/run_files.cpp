// The files of one simulated run: metrics.jsonl, peers.jsonl and topology.jsonl
// (docs/formats/metrics.md).
#include <filesystem>
#include <system_error>

#include "gossamer/core/metrics.hpp"
#include "gossamer/core/text_metrics.hpp"
#include "gossamer/sim/sweep.hpp"

namespace gossamer::sim {
namespace {

void write_run_files(const std::filesystem::path& dir, const SimResult& r) {
    std::filesystem::create_directories(dir);
    MetricsWriter m((dir / "metrics.jsonl").string());
    for (const auto& e : r.evals) {
        json::Json rec = {{"time", e.time},
                          {"accuracy", e.accuracy},
                          {"loss", e.loss},
                          {"min_accuracy", e.min_accuracy},
                          {"max_accuracy", e.max_accuracy},
                          {"mean_accuracy", e.mean_accuracy},
                          {"consensus", e.consensus},
                          {"samples", e.samples},
                          {"bytes", e.bytes},
                          {"backward_macs", e.backward_macs},
                          {"live", e.live}};
        if (r.text) {
            rec["bpc"] = text_metrics::bits_per_char(e.loss);
            rec["mean_loss"] = e.mean_loss;
        }
        m.write(rec);
    }
    MetricsWriter p((dir / "peers.jsonl").string());
    for (const auto& s : r.peers) {
        if (!s.recorded) continue;  // --peer-metrics
        json::Json rec = {{"rank", s.rank},
                          {"steps", s.steps},
                          {"busy", s.busy},
                          {"idle", s.idle},
                          {"idle_share", s.idle_share},
                          {"bytes_sent", s.bytes_sent},
                          {"bytes_received", s.bytes_received},
                          {"failed", s.failed},
                          {"left", s.left},
                          {"joins", s.joins},
                          {"mass", s.mass}};
        if (!s.edges.is_null()) rec["edges"] = s.edges;
        if (!s.outer.empty()) {  // "outer": steps are rounds (docs/formats/metrics.md)
            rec["outer"] = s.outer;
            rec["rounds"] = s.steps;
            rec["inner_steps"] = s.inner_steps;
        }
        if (!s.partitions.is_null()) {
            rec["backward_macs"] = s.backward_macs;
            rec["partitions"] = s.partitions;
        }
        p.write(rec);
    }
    if (r.topology_versions.empty()) return;
    // Churn or failures: each version of the topology the job went through
    // (docs/operations/elastic.md).
    MetricsWriter t((dir / "topology.jsonl").string());
    for (const auto& v : r.topology_versions) {
        json::Json rec = {{"version", v.version},
                          {"time", v.time},
                          {"live", v.live},
                          {"connected", v.connected},
                          {"analysis", v.line}};
        rec["spectral_gap"] = v.spectral_gap ? json::Json(*v.spectral_gap) : json::Json(nullptr);
        t.write(rec);
    }
}

}  // namespace

void write_run(const std::filesystem::path& dir, const SimResult& r) {
    const std::filesystem::path partial = dir.string() + ".partial";
    std::filesystem::remove_all(partial);
    try {
        write_run_files(partial, r);
    } catch (...) {
        std::error_code ec;
        std::filesystem::remove_all(partial, ec);
        throw;
    }
    std::filesystem::rename(partial, dir);
}

}  // namespace gossamer::sim
