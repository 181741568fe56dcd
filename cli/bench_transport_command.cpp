// gossamer bench transport and calibrate: the UCX backend's bandwidth and latency beside
// ucx_perftest, and this machine's step time and link speed as a cluster file.
#include <fmt/format.h>

#include <iostream>
#include <sstream>

#include "bench_commands.hpp"
#include "calibrate.hpp"
#include "gossamer/core/progress.hpp"
#include "gossamer/core/units.hpp"
#include "transport.hpp"

namespace gossamer::cli {

int run_transport_bench(const std::vector<std::string>& args) {
    ArgParser p("gossamer bench transport", "[options]",
                "Point-to-point bandwidth of the UCX backend for 4 KiB .. 64 MiB (rank 0 keeps "
                "--window sends in flight to rank 1) and 8-byte one-way latency (half the "
                "round trip, send call to receive callback), two processes with their own UCX "
                "workers, spinning; beside ucx_perftest ucp_am_bw / ucp_am_lat on localhost "
                "with the same UCX_TLS (scripts/deps.sh --bench installs it). Targets: "
                "bandwidth ratio >= 0.9 at >= 1 MiB, latency ratio <= 2. Exit 1 when the "
                "reference cannot run.",
                {{"sizes", "LIST",
                  "comma-separated payload sizes, e.g. 4KiB,1MiB (default "
                  "4KiB..64MiB, x4)"},
                 {"bytes-per-size", "SIZE",
                  "bytes moved per size (default 1GiB; 20..20000 "
                  "messages)"},
                 {"latency-iterations", "N", "8-byte round trips (default 20000)"},
                 {"window", "N", "most sends in flight (default 16, and at most 1 MiB)"},
                 {"window-bytes", "SIZE",
                  "most bytes in flight (default 1MiB; at least one "
                  "message)"},
                 {"repeats", "N",
                  "runs of each side per row, alternated; the best counts "
                  "(default 3)"},
                 {"errors", "MODE",
                  "UCX error handling: peer (default; ucx_perftest -e) or "
                  "none (shared memory usable; docs/modules/transport.md)"},
                 {"perftest", "PROGRAM", "the reference program (default ucx_perftest)"},
                 {"no-reference", "", "skip ucx_perftest (no ratio)"},
                 {"save", "FILE", "also write the JSON report to FILE"},
                 {"json", "", "print JSON"}},
                0);
    auto a = p.parse(args);
    if (a.help) return std::cout << p.help(), 0;
    bench::TransportBenchOptions o;
    if (auto prog = a.value("perftest")) o.perftest = *prog;
    if (auto e = a.value("errors")) {
        if (*e != "peer" && *e != "none") throw UsageError("--errors: use peer or none");
        o.peer_errors = *e == "peer";
    }
    if (auto list = a.value("sizes")) {
        std::stringstream ss(*list);
        for (std::string item; std::getline(ss, item, ',');) {
            auto b = parse_bytes(item);
            if (!b || *b < 8 || *b % 4 != 0 || *b > (1ull << 31))
                throw UsageError(fmt::format(
                    "--sizes: '{}' is not a size of 8 B .. 2 GiB in whole floats, e.g. 64KiB",
                    item));
            o.sizes.push_back(static_cast<std::size_t>(*b));
        }
    }
    if (auto b = a.value("bytes-per-size")) {
        auto bytes = parse_bytes(*b);
        if (!bytes || *bytes == 0)
            throw UsageError("--bytes-per-size: expected a size, e.g. 256MiB");
        o.bytes_per_size = static_cast<std::size_t>(*bytes);
    }
    o.latency_iterations =
        static_cast<int>(a.integer("latency-iterations", o.latency_iterations, 10, 10'000'000));
    o.window = static_cast<int>(a.integer("window", o.window, 1, 1024));
    o.repeats = static_cast<int>(a.integer("repeats", o.repeats, 1, 100));
    if (auto b = a.value("window-bytes")) {
        auto bytes = parse_bytes(*b);
        if (!bytes) throw UsageError("--window-bytes: expected a size, e.g. 16MiB");
        o.window_bytes = static_cast<std::size_t>(*bytes);
    }
    o.reference = !a.flag("no-reference");
    Progress progress(30.0);
    o.progress = [&](std::string_view line) { progress(line); };
    auto report = bench::run_transport(o);
    progress.done();
    print_and_save(a, report.to_json(), report.to_text());
    return o.reference && !report.reference_error.empty() ? 1 : 0;
}

int run_calibrate_bench(const std::vector<std::string>& args) {
    ArgParser p("gossamer bench calibrate", "--config TRAIN [options]",
                "Measures this machine's local step time for a training config (the step a "
                "peer runs, one BLAS thread by default) and the bandwidth and one-way latency "
                "between two local UCX processes, and writes them as a cluster file "
                "(docs/formats/cluster-format.md) that gossamer sim --cluster reads.",
                {{"config", "FILE", "the training config (docs/formats/train-config.md)"},
                 {"out", "FILE", "the cluster file to write (default: none, print only)"},
                 {"peers", "N", "shard the data for N peers, as the real run (default 1)"},
                 {"steps", "N", "timed local steps (default 30)"},
                 {"warmup", "N", "untimed local steps before them (default 5)"},
                 {"threads", "N", "BLAS threads per step (default 1, as launch gives a peer)"},
                 {"errors", "MODE",
                  "UCX error handling of the link: peer (default, as real "
                  "peers; TCP loopback here) or none (shared memory)"},
                 {"link-bytes", "SIZE", "message size of the bandwidth test (default 4MiB)"},
                 {"json", "", "print JSON"}},
                0);
    auto a = p.parse(args);
    if (a.help) return std::cout << p.help(), 0;
    if (!a.value("config")) throw UsageError("gossamer bench calibrate: --config FILE is required");
    bench::CalibrateOptions o;
    o.config = *a.value("config");
    if (auto out = a.value("out")) o.out = *out;
    o.peers = static_cast<int>(a.integer("peers", o.peers, 1, 4096));
    o.steps = static_cast<int>(a.integer("steps", o.steps, 1, 1000000));
    o.warmup = static_cast<int>(a.integer("warmup", o.warmup, 0, 1000000));
    o.threads = static_cast<int>(a.integer("threads", o.threads, 1, 256));
    if (auto e = a.value("errors")) {
        if (*e != "peer" && *e != "none") throw UsageError("--errors: use peer or none");
        o.peer_errors = *e == "peer";
    }
    if (auto b = a.value("link-bytes")) {
        auto bytes = parse_bytes(*b);
        if (!bytes || *bytes < 4 || *bytes % 4 != 0 || *bytes > (1ull << 30))
            throw UsageError("--link-bytes: give whole floats from 4 B to 1 GiB, e.g. 4MiB");
        o.link_bytes = static_cast<std::size_t>(*bytes);
    }
    Progress progress(30.0);
    o.progress = [&](std::string_view line) { progress(line); };
    auto report = bench::run_calibrate(o);
    progress.done();
    std::cout << (a.flag("json") ? report.to_json().dump(2) + "\n" : report.to_text());
    return 0;
}
}  // namespace gossamer::cli
