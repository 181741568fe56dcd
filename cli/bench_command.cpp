// gossamer bench compute: benchmarks that print a ratio against a reference run beside them.
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <sstream>

#include "args.hpp"
#include "commands.hpp"
#include "compute.hpp"

namespace gossamer::cli {

int run_bench(const std::vector<std::string>& args) {
    const char* help = R"(usage: gossamer bench BENCHMARK [options]

benchmarks:
  compute   training throughput of the MLP and the CNN (batch 64, one thread) beside PyTorch

Each prints a ratio against a reference measured in the same run. scripts/bench.sh runs them all.
)";
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        std::cout << help;
        return args.empty() ? 2 : 0;
    }
    if (args[0] != "compute")
        throw UsageError(
            fmt::format("gossamer bench: unknown benchmark '{}'; use compute", args[0]));
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
    auto a = p.parse({args.begin() + 1, args.end()});
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
    std::cout << (a.flag("json") ? report.to_json().dump(2) + "\n" : report.to_text());
    if (auto path = a.value("save")) {
        std::ofstream out(*path);
        out << report.to_json().dump(2) << "\n";
        if (!out) throw UsageError(fmt::format("--save: cannot write {}", *path));
    }
    return o.reference && !report.reference_error.empty() ? 1 : 0;
}

}  // namespace gossamer::cli
