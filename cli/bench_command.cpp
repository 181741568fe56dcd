// gossamer bench compute|mix|transport|allreduce|calibrate|trace: benchmarks that print a ratio
// against a reference run beside them. This file dispatches and holds the CPU benchmarks; the UCX
// ones are in bench_transport_command.cpp and bench_allreduce_command.cpp.
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <sstream>

#include "bench_commands.hpp"
#include "commands.hpp"
#include "compute.hpp"
#include "gossamer/core/progress.hpp"
#include "gossamer/core/units.hpp"
#include "mix.hpp"
#include "mix_device.hpp"
#include "trace_cost.hpp"

namespace gossamer::cli {

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
                "Samples per second of forward + backward + SGD step, one BLAS thread, for the "
                "MLP 784-256-128-10 and the CNN (16 and 32 5x5 channels) at batch 64, and the "
                "GPTs gpt_tiny (L2 H4 W128 T64, batch 16) and gpt_lab (L4 H4 W192 T64, batch 8) "
                "on 63 characters, beside the same models in PyTorch on one CPU thread "
                "(bench/torch_ref.py, run by /usr/bin/python3; scripts/deps.sh --bench installs "
                "it). Targets: ratio >= 1.0 (MLP), >= 0.7 (CNN), >= 0.8 (GPTs). Exit 1 when the "
                "reference cannot run.",
                {{"models", "LIST", "comma-separated: mlp,cnn,gpt_tiny,gpt_lab (default all)"},
                 {"seconds", "S", "measuring time per model and side (default 3)"},
                 {"batch", "N", "batch size for every model (default: each model's own)"},
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

int run_bench(const std::vector<std::string>& args) {
    const char* help = R"(usage: gossamer bench BENCHMARK [options]

benchmarks:
  compute   training throughput of the MLP, the CNN and the GPTs (one thread) beside PyTorch
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
