// The gossamer binary: dispatches to subcommands and turns errors into one line and an exit
// status (2 for bad input or usage, 1 for anything unexpected).
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "args.hpp"
#include "commands.hpp"
#include "gossamer/core/blas.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/core/file_io.hpp"
#include "gossamer/core/memory.hpp"
#include "gossamer/core/version.hpp"
#ifdef GOSSAMER_HAVE_UCX
#include "gossamer/transport/ucx.hpp"
#endif

namespace {

const char* kHelp = R"(usage: gossamer COMMAND [options]

Gossamer: decentralized (gossip) training on heterogeneous clusters.

commands:
  topo      topology files: show (analysis), validate, gen, matrix, dot
  train     train one model in one process from a training config
  sim       simulate many peers with heterogeneous speeds in virtual time
  launch    run the local peers of a topology for real, as gossamer peer processes
  peer      run one real peer of a job over UCX (one process per rank; mpirun, srun)
  lab       network-namespace lab: check, up, down, clean (root; docs/operations/lab.md)
  eval      test loss and accuracy (text: bits per character) of a saved model
  sample    text a saved language model generates from a prompt
  report    one self-contained HTML page from a run folder of sim or launch
  bench     benchmarks with a reference measured in the same run (compute)

'gossamer COMMAND --help' describes a command. Exit status: 0 success, 1 internal error,
2 bad input or usage (out of memory and a full disk included), 3 training diverged (a NaN or
infinite loss or model value). Logging: GOSSAMER_LOG_LEVEL=error|warn|info|debug|trace (stderr).
)";

// The version, and what the UCX loaded here can move (UCP's own answer; docs/operations/gpu.md).
int print_version() {
    std::cout << "gossamer " << gossamer::kVersion << "\n";
#ifdef GOSSAMER_HAVE_UCX
    namespace tr = gossamer::transport;
    std::cout << "UCX " << tr::ucx_version() << "\n";
    try {
        const auto types = tr::query_ucx_memory_types();
        std::cout << "UCX memory types: " << types.names
                  << " (device buffers: " << tr::device_transfer_path(types) << ")\n";
    } catch (const gossamer::TransportError& e) {
        std::cout << "UCX memory types: unknown (" << e.what() << ")\n";
    }
#endif
    return 0;
}

int dispatch(const std::vector<std::string>& args) {
    if (args.empty()) {
        std::cerr << kHelp;
        return 2;
    }
    const std::string& cmd = args[0];
    if (cmd == "--help" || cmd == "-h" || cmd == "help") return std::cout << kHelp, 0;
    if (cmd == "--version") return print_version();
    const std::vector<std::string> rest(args.begin() + 1, args.end());
    if (cmd == "topo") return gossamer::cli::run_topo(rest);
    if (cmd == "train") return gossamer::cli::run_train(rest);
    if (cmd == "bench") return gossamer::cli::run_bench(rest);
    if (cmd == "sim") return gossamer::cli::run_sim(rest);
    if (cmd == "launch") return gossamer::cli::run_launch(rest);
    if (cmd == "peer") return gossamer::cli::run_peer(rest);
    if (cmd == "eval") return gossamer::cli::run_eval(rest);
    if (cmd == "sample") return gossamer::cli::run_sample(rest);
    if (cmd == "report") return gossamer::cli::run_report(rest);
    if (cmd == "lab") return gossamer::cli::run_lab(rest);
    throw gossamer::cli::UsageError(
        fmt::format("gossamer: unknown command '{}'; see 'gossamer --help'", cmd));
}

// OpenBLAS picks its kernels when it is loaded, from OPENBLAS_CORETYPE or its own CPU
// detection, which in 0.3.21 falls back to generic kernels on some newer Xeons (about 4x slower
// models). When the user set nothing, start again once with the kernels that fit the CPU.
// GOSSAMER_BLAS_AUTO=0 turns this off (docs/architecture.md).
void pick_blas_kernels(char** argv) {
    if (std::getenv("OPENBLAS_CORETYPE")) return;
    if (const char* automatic = std::getenv("GOSSAMER_BLAS_AUTO");
        automatic && std::string(automatic) == "0")
        return;
    const char* better = gossamer::better_blas_core();
    if (!better) return;
    setenv("OPENBLAS_CORETYPE", better, 1);
    execv("/proc/self/exe", argv);  // returns only on failure: then run with what we have
    unsetenv("OPENBLAS_CORETYPE");
}

// One error line. Its values come from files and flags: control characters in them are
// escaped, so an ESC sequence in a JSON string cannot reach the terminal raw
// (docs/operations/errors.md).
void print_error(std::string_view what) {
    std::fprintf(stderr, "error: %s\n", gossamer::cli::printable(what).c_str());
}

// "PATH: cannot create directories: No space left on device" from libstdc++'s
// "filesystem error: cannot create directories: No space left on device [PATH]".
std::string filesystem_line(const std::filesystem::filesystem_error& e) {
    std::string what = e.what();
    const std::string prefix = "filesystem error: ";
    if (what.rfind(prefix, 0) == 0) what.erase(0, prefix.size());
    if (const auto bracket = what.find(" ["); bracket != std::string::npos) what.resize(bracket);
    return e.path1().empty() ? what : fmt::format("{}: {}", e.path1().string(), what);
}

}  // namespace

int main(int argc, char** argv) {
    pick_blas_kernels(argv);
    try {
        return dispatch(std::vector<std::string>(argv + 1, argv + argc));
    } catch (const gossamer::cli::UsageError& e) {
        print_error(e.what());
        return 2;
    } catch (const gossamer::ConfigError& e) {
        print_error(e.what());
        return 2;
    } catch (const gossamer::TopologyError& e) {
        print_error(e.what());
        return 2;
    } catch (const gossamer::Diverged& e) {
        // Training produced a NaN or an infinity (docs/operations/reliability.md): as `train`
        // exits.
        print_error(e.what());
        return 3;
    } catch (const gossamer::IoError& e) {
        // A full disk, a read-only file system: the line names the path and the cause.
        print_error(e.what());
        return 2;
    } catch (const std::filesystem::filesystem_error& e) {
        print_error(filesystem_line(e));
        return 2;
    } catch (const std::bad_alloc&) {
        // A size the run was given asked for more memory than the machine would give; the
        // commands check their estimate first (docs/operations/errors.md), this is what slipped
        // past it.
        const std::string what = gossamer::failed_allocation();
        std::fprintf(stderr,
                     "error: out of memory%s%s; use smaller sizes (model, --model-size, peers, "
                     "batch) or a machine with more memory\n",
                     what.empty() ? "" : " while allocating ",
                     gossamer::cli::printable(what).c_str());
        return 2;
    } catch (const std::exception& e) {
        print_error(std::string("internal: ") + e.what());
        return 1;
    }
}
