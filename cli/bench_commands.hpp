#pragma once
/// The benchmarks of `gossamer bench` (bench_command.cpp dispatches): each parses its flags,
/// calls bench/ and prints its report.

#include <string>
#include <vector>

#include "args.hpp"
#include "gossamer/core/json.hpp"

namespace gossamer::cli {

/// The report as text, or as JSON with --json; and as JSON to --save FILE when given.
void print_and_save(const ParsedArgs& a, const json::Json& j, const std::string& text);

int run_trace_bench(const std::vector<std::string>& args);
int run_mix_bench(const std::vector<std::string>& args);
int run_compute_bench(const std::vector<std::string>& args);
// bench_transport_command.cpp (UCX builds)
int run_transport_bench(const std::vector<std::string>& args);
int run_calibrate_bench(const std::vector<std::string>& args);
// bench_allreduce_command.cpp (UCX builds)
int run_allreduce_bench(const std::vector<std::string>& args);

}  // namespace gossamer::cli
