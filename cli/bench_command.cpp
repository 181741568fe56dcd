// gossamer bench compute|mix|transport: benchmarks that print a ratio against a reference run
// beside them.
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <sstream>

#include "args.hpp"
#include "commands.hpp"
#include "compute.hpp"
#include "gossamer/core/progress.hpp"
#include "gossamer/core/units.hpp"
#include "mix.hpp"
#include "mix_device.hpp"
#include "trace_cost.hpp"
#ifdef GOSSAMER_HAVE_UCX
#include "allreduce.hpp"
#include "calibrate.hpp"
#include "transport.hpp"
#endif

namespace gossamer::cli {
namespace {

void print_and_save(const ParsedArgs& a, const json::Json& j, const std::string& text) {
    std::cout << (a.flag("json") ? j.dump(2) + "\n" : text);
    if (auto path = a.value("save")) {
        std::ofstream out(*path);
        out << j.dump(2) << "\n";
        if (!out) throw UsageError(fmt::format("--save: cannot write {}", *path));
    }
}

int run_trace_bench(const std::vector<std::string>& args) {
    ArgParser p("gossamer bench trace", "[options]",
                "The cost of recording one timeline event (--trace, docs/formats/trace.md): waits, "
                "steps, sends and receives of 8 peers in turn, beside writing one metrics line "
                "(a peer's per-step record, flushed), alternated in the same run, best of "
                "--repeats. Target: one event costs less than a tenth of a metrics line.",
                {{"events", "N", "events recorded per repeat (default 2000000)"},
                 {"lines", "N", "metrics lines per repeat (default 20000)"},
                 {"repeats", "K", "alternated repeats (default 5)"},
                 {"json", "", "print JSON"},
                 {"save", "FILE", "also write the JSON to FILE"}},
                0);
    auto a = p.parse(args);
    if (a.help) return std::cout << p.help(), 0;
    bench::TraceCostOptions o;
    o.events = a.integer("events", o.events, 1000, 1'000'000'000);
    o.lines = a.integer("lines", o.lines, 100, 100'000'000);
    o.repeats = static_cast<int>(a.integer("repeats", o.repeats, 1, 1000));
    const auto r = bench::run_trace_cost(o);
    print_and_save(a, r.to_json(), r.to_text());
    return 0;
}

int run_mix_bench(const std::vector<std::string>& args) {
    ArgParser p(
        "gossamer bench mix", "[options]",
        "Effective memory bandwidth of the fused mixing kernel x <- w*x + sum_j w_j*b_j "
        "for k = 1..8 neighbours, counting (k+2)*S bytes per call, beside memcpy of "
        "buffers of the same size S, counting 2*S, alternated in the same run; one "
        "thread, best of --repeats. Target: ratio >= 0.8.",
        {{"bytes", "SIZE", "bytes per buffer, e.g. 512MiB (default max(128MiB, 4x LLC))"},
         {"neighbours", "K", "largest k (default 8)"},
         {"repeats", "N", "timed calls per k and side (default 5)"},
         {"isa", "NAME", "kernels: scalar, avx2 or avx512 (default the best here)"},
         {"stores", "HOW", "auto, regular or streaming (non-temporal) (default auto)"},
         {"device", "NAME", "cpu (default) or cuda: the device kernels (docs/operations/gpu.md)"},
         {"save", "FILE", "also write the JSON report to FILE"},
         {"json", "", "print JSON"}},
        0);
    auto a = p.parse(args);
    if (a.help) return std::cout << p.help(), 0;
    bench::MixOptions o;
    if (auto b = a.value("bytes")) {
        auto bytes = parse_bytes(*b);
        if (!bytes || *bytes < sizeof(float))
            throw UsageError("--bytes: expected a size of at least 4 bytes, e.g. 512MiB");
        o.bytes = static_cast<std::size_t>(*bytes);
    }
    o.max_neighbours = static_cast<int>(a.integer("neighbours", o.max_neighbours, 1, 64));
    o.repeats = static_cast<int>(a.integer("repeats", o.repeats, 1, 1000));
    if (auto d = a.value("device"); d && *d != "cpu") {  // bench/mix_device.hpp
        auto r = bench::run_mix_device({*d, o.bytes, a.value("repeats") ? o.repeats : 20, {}});
        return print_and_save(a, r.to_json(), r.to_text()), 0;
    }
    if (auto isa = a.value("isa"); isa && !parse_simd_isa(isa->c_str(), o.isa))
        throw UsageError("--isa: use scalar, avx2 or avx512");
    if (auto isa = a.value("isa"); isa && !simd_isa_supported(o.isa))
        throw UsageError(fmt::format("--isa: this CPU or build does not run {}", *isa));
    if (auto st = a.value("stores"); st && !parse_store_policy(st->c_str(), o.stores))
        throw UsageError("--stores: use auto, regular or streaming");
    Progress progress(30.0);
    o.progress = [&](std::string_view line) { progress(line); };
    auto report = bench::run_mix(o);
    progress.done();
    print_and_save(a, report.to_json(), report.to_text());
    return 0;
}

int run_compute_bench(const std::vector<std::string>& args) {
    ArgParser p("gossamer bench compute", "[options]",
                "Samples per second of forward + backward + SGD step, batch 64, one BLAS thread, "
                "for the MLP 784-256-128-10 and the CNN (16 and 32 5x5 channels), beside the "
                "same models in PyTorch on one CPU thread (bench/torch_ref.py, run by "
                "/usr/bin/python3; scripts/deps.sh --bench installs it). Targets: ratio >= 1.0 "
                "(MLP) and >= 0.7 (CNN). Exit 1 when the reference cannot run.",
                {{"models", "LIST", "comma-separated: mlp,cnn (default both)"},
                 {"seconds", "S", "measuring time per model and side (default 3)"},
                 {"batch", "N", "batch size (default 64)"},
                 {"no-reference", "", "skip PyTorch (no ratio)"},
                 {"save", "FILE", "also write the JSON report to FILE"},
                 {"json", "", "print JSON"}},
                0);
    auto a = p.parse(args);
    if (a.help) return std::cout << p.help(), 0;
    bench::ComputeOptions o;
    if (auto m = a.value("models")) {
        o.models.clear();
        std::stringstream ss(*m);
        for (std::string item; std::getline(ss, item, ',');) o.models.push_back(item);
    }
    o.seconds = a.number("seconds", o.seconds);
    if (!(o.seconds > 0)) throw UsageError("--seconds: must be > 0");
    o.batch = static_cast<int>(a.integer("batch", o.batch, 1, 1 << 16));
    o.reference = !a.flag("no-reference");
    auto report = bench::run_compute(o);
    print_and_save(a, report.to_json(), report.to_text());
    return o.reference && !report.reference_error.empty() ? 1 : 0;
}

#ifdef GOSSAMER_HAVE_UCX
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

// "1,4,16" (MiB) or sizes with a unit ("64KiB,1MiB"): whole floats, 4 B .. 1 GiB.
std::vector<std::size_t> parse_size_list(const std::string& option, const std::string& list) {
    std::vector<std::size_t> out;
    std::stringstream ss(list);
    for (std::string item; std::getline(ss, item, ',');) {
        const bool plain =
            !item.empty() && item.find_first_not_of("0123456789") == std::string::npos;
        auto b = parse_bytes(item);
        if (b && plain) *b <<= 20;
        if (!b || *b < 4 || *b % 4 != 0 || *b > (1ull << 30))
            throw UsageError(
                fmt::format("{}: '{}' is not a size of whole floats from 4 B to 1 GiB; "
                            "give MiB (1,4,16) or a unit (64KiB)",
                            option, item));
        out.push_back(static_cast<std::size_t>(*b));
    }
    if (out.empty()) throw UsageError(option + ": give at least one size, e.g. 1,4,16");
    return out;
}

int run_allreduce_bench(const std::vector<std::string>& args) {
    ArgParser p("gossamer bench allreduce", "[options]",
                "Our ring all-reduce (the allreduce protocol training runs) of fp32 between real "
                "processes over UCX, beside OpenMPI's MPI_Allreduce run by mpirun with its "
                "default algorithm and with its ring forced, and one round of the one-peer "
                "exponential neighbour exchange of the same size. Each result is checked. Time "
                "per op: median over iterations of the slowest rank's time, each after a "
                "barrier. Target at 2 processes: ours / the faster MPI <= 1.1.",
                {{"procs", "LIST", "process counts (default 2,4,8)"},
                 {"sizes", "LIST", "sizes in MiB (1,4,16,64, the default) or with a unit (64KiB)"},
                 {"iters", "N", "timed iterations per size (default 20)"},
                 {"warmup", "N", "untimed iterations before them (default 5)"},
                 {"chunks", "N",
                  "chunks per ring segment, pipelined (default: per size, messages of about "
                  "1 MiB; training default 1)"},
                 {"repeats", "N",
                  "runs of each side, alternated; the lowest median counts "
                  "(default 3)"},
                 {"errors", "MODE",
                  "UCX error handling: none (default; shared memory) or peer "
                  "(TCP loopback)"},
                 {"no-reference", "", "skip MPI"},
                 {"mpirun", "PROGRAM", "the mpirun to use (default mpirun)"},
                 {"mpi-program", "PROGRAM", "the MPI reference (default the one built here)"},
                 {"timeout", "S", "longest wait for one operation or barrier (default 120)"},
                 {"json", "FILE", "also write the report as JSON to FILE"}},
                0);
    auto a = p.parse(args);
    if (a.help) return std::cout << p.help(), 0;
    bench::AllreduceBenchOptions o;
    if (auto list = a.value("procs")) {
        o.procs.clear();
        std::stringstream ss(*list);
        for (std::string item; std::getline(ss, item, ',');) {
            char* end = nullptr;
            const long v = std::strtol(item.c_str(), &end, 10);
            if (item.empty() || *end != 0 || v < 2 || v > 64)
                throw UsageError(fmt::format(
                    "--procs: '{}' is not a process count from 2 to 64, e.g. 2,4,8", item));
            o.procs.push_back(static_cast<int>(v));
        }
        if (o.procs.empty()) throw UsageError("--procs: give at least one count, e.g. 2,4,8");
    }
    if (auto list = a.value("sizes")) o.sizes = parse_size_list("--sizes", *list);
    o.iterations = static_cast<int>(a.integer("iters", o.iterations, 1, 100000));
    o.warmup = static_cast<int>(a.integer("warmup", o.warmup, 0, 100000));
    o.chunks = static_cast<int>(a.integer("chunks", 0, 1, 65536));
    o.repeats = static_cast<int>(a.integer("repeats", o.repeats, 1, 100));
    if (auto e = a.value("errors")) {
        if (*e != "peer" && *e != "none") throw UsageError("--errors: use none or peer");
        o.peer_errors = *e == "peer";
    }
    o.reference = !a.flag("no-reference");
    if (auto m = a.value("mpirun")) o.mpirun = *m;
    if (auto m = a.value("mpi-program")) o.mpi_program = *m;
    const double timeout = a.number("timeout", 120.0);
    if (!(timeout > 0) || timeout > 86400)
        throw UsageError("--timeout: give seconds between 0 and 86400, e.g. 60");
    o.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(timeout * 1000));
    Progress progress(30.0);
    o.progress = [&](std::string_view line) { progress(line); };
    auto report = bench::run_allreduce_bench(o);
    progress.done();
    std::cout << report.to_text();
    if (auto path = a.value("json")) {
        std::ofstream out(*path);
        out << report.to_json().dump(2) << "\n";
        if (!out) throw UsageError(fmt::format("--json: cannot write {}", *path));
    }
    return 0;
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
#endif

}  // namespace

int run_bench(const std::vector<std::string>& args) {
    const char* help = R"(usage: gossamer bench BENCHMARK [options]

benchmarks:
  compute   training throughput of the MLP and the CNN (batch 64, one thread) beside PyTorch
  mix       bandwidth of the fused mixing kernel for 1..8 neighbours beside memcpy
  transport UCX point-to-point bandwidth and latency beside ucx_perftest
  allreduce ring all-reduce between real processes beside OpenMPI's MPI_Allreduce
  calibrate measure step time and link speed, write a cluster file for gossamer sim
  trace     the cost of recording one timeline event beside writing one metrics line

Each prints a ratio against a reference measured in the same run. scripts/bench.sh runs them all.
)";
    if (args.empty())  // usage errors go to stderr as one line, exit 2 (docs/operations/cli.md)
        throw UsageError(
            "gossamer bench: missing benchmark; use compute, mix, transport, allreduce, calibrate "
            "or trace (see 'gossamer bench --help')");
    if (args[0] == "--help" || args[0] == "-h") return std::cout << help, 0;
    const std::vector<std::string> rest(args.begin() + 1, args.end());
    if (args[0] == "compute") return run_compute_bench(rest);
    if (args[0] == "mix") return run_mix_bench(rest);
    if (args[0] == "trace") return run_trace_bench(rest);
#ifdef GOSSAMER_HAVE_UCX
    if (args[0] == "transport") return run_transport_bench(rest);
    if (args[0] == "allreduce") return run_allreduce_bench(rest);
    if (args[0] == "calibrate") return run_calibrate_bench(rest);
#else
    if (args[0] == "transport" || args[0] == "allreduce" || args[0] == "calibrate")
        throw UsageError(
            fmt::format("gossamer bench {}: built without UCX (GOSSAMER_USE_UCX=OFF)", args[0]));
#endif
    throw UsageError(fmt::format(
        "gossamer bench: unknown benchmark '{}'; use compute, mix, transport, allreduce, "
        "calibrate or trace",
        args[0]));
}

}  // namespace gossamer::cli
