// gossamer bench allreduce: our ring all-reduce between real processes beside OpenMPI's
// MPI_Allreduce.
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "allreduce.hpp"
#include "bench_commands.hpp"
#include "gossamer/core/progress.hpp"
#include "gossamer/core/units.hpp"

namespace gossamer::cli {
namespace {

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

}  // namespace

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

}  // namespace gossamer::cli
