// The table and the JSON of `gossamer bench allreduce`. Bandwidths as nccl-tests and OSU give
// them: algbw = size / time, busbw = algbw * 2(n - 1) / n (what each link carries for a ring).
#include <fmt/format.h>

#include "allreduce.hpp"
#include "gossamer/core/units.hpp"

namespace gossamer::bench {
namespace {

double algbw(std::size_t bytes, double seconds) {
    return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0.0;
}

double busbw(int n, std::size_t bytes, double seconds) {
    return algbw(bytes, seconds) * 2.0 * (n - 1) / n;
}

json::Json stats_json(const OpStats& s, int n, std::size_t bytes) {
    return {{"median_s", s.median},
            {"mean_s", s.mean},
            {"min_s", s.min},
            {"algbw_gb_per_s", algbw(bytes, s.median)},
            {"busbw_gb_per_s", busbw(n, bytes, s.median)}};
}

std::string ms(const OpStats& s) {
    return s.measured() ? fmt::format("{:.2f}", s.median * 1e3) : "-";
}

}  // namespace

json::Json AllreduceReport::to_json() const {
    json::Json j = {
        {"operation", "all-reduce, fp32, sum (ours: average)"},
        {"ours", "proto::AllreduceProtocol over UCX, one process per rank"},
        {"reference", "OpenMPI MPI_Allreduce (default algorithm; ring forced)"},
        {"statistic", "median over iterations of the slowest rank's time"},
        {"iterations", iterations},
        {"warmup", warmup},
        {"chunks", chunks > 0 ? json::Json(chunks) : json::Json("about 1 MiB per message")},
        {"repeats", repeats},
        {"ucx_error_handling", peer_errors ? "peer" : "none"},
        {"cores", cores},
        {"rows", json::Json::array()}};
    for (const auto& r : rows) {
        json::Json row = {{"procs", r.procs},
                          {"bytes", r.bytes},
                          {"chunks", r.chunks},
                          {"ours", stats_json(r.ours, r.procs, r.bytes)}};
        if (r.mpi_default.measured())
            row["mpi_default"] = stats_json(r.mpi_default, r.procs, r.bytes);
        if (r.mpi_ring.measured()) row["mpi_ring"] = stats_json(r.mpi_ring, r.procs, r.bytes);
        if (r.best_mpi() > 0) row["ratio"] = r.ours.median / r.best_mpi();
        if (r.target > 0) row["target_ratio_max"] = r.target;
        if (r.exchange.measured()) {
            row["exchange"] = {{"median_s", r.exchange.median},
                               {"mean_s", r.exchange.mean},
                               {"min_s", r.exchange.min}};
            row["exchange_over_allreduce"] = r.exchange.median / r.ours.median;
        }
        j["rows"].push_back(row);
    }
    if (!reference_error.empty()) j["reference_error"] = reference_error;
    return j;
}

std::string AllreduceReport::to_text() const {
    std::string out = fmt::format(
        "Ring all-reduce of fp32 (our AllreduceProtocol over UCX, one process per rank; UCX "
        "error handling {}) beside OpenMPI MPI_Allreduce (mpirun --oversubscribe), and one "
        "round of the one-peer exponential exchange; median of {} iterations after {} warm-up, "
        "each the slowest rank's time; best of {} runs per side; {} cores{}\n",
        peer_errors ? "peer: TCP loopback" : "none: shared memory", iterations, warmup, repeats,
        cores,
        chunks > 0 ? fmt::format("; {} chunks per ring segment", chunks)
                   : "; chunks per ring segment: messages of about 1 MiB");
    if (!reference_error.empty())
        out += "MPI reference not run: " + reference_error + "; showing ours only\n";
    out += fmt::format("{:>5} {:>9} {:>6} {:>9} {:>7} {:>9} {:>9} {:>6} {:>7}  {:>11} {:>8}\n",
                       "procs", "size", "chunks", "ours[ms]", "busbw", "MPI[ms]", "ring[ms]",
                       "ratio", "target", "exchange[ms]", "exch/ar");
    for (const auto& r : rows) {
        const double best = r.best_mpi();
        const double ratio = best > 0 ? r.ours.median / best : 0.0;
        std::string verdict;
        if (r.target > 0 && best > 0) verdict = ratio <= r.target ? "ok" : "ABOVE TARGET";
        out += fmt::format(
            "{:>5} {:>9} {:>6} {:>9} {:>7.2f} {:>9} {:>9} {:>6} {:>7}  {:>11} {:>8}  {}\n", r.procs,
            format_bytes(static_cast<double>(r.bytes)), r.chunks, ms(r.ours),
            busbw(r.procs, r.bytes, r.ours.median), ms(r.mpi_default), ms(r.mpi_ring),
            best > 0 ? fmt::format("{:.2f}", ratio) : "-",
            r.target > 0 ? fmt::format("<= {:.1f}", r.target) : "", ms(r.exchange),
            r.exchange.measured() ? fmt::format("{:.2f}", r.exchange.median / r.ours.median) : "-",
            verdict);
    }
    out +=
        "busbw: GB/s of ours, 2(n-1)/n x size / time; ratio: ours / the faster MPI; "
        "exch/ar: exchange round / ours\n";
    return out;
}

}  // namespace gossamer::bench
