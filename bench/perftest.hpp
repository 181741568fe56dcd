#pragma once
/// Runs ucx_perftest as server and client on localhost (the environment, UCX_TLS included, is
/// inherited) and reads the overall figure of its "Final:" line.

#include <cstddef>
#include <string>

namespace gossamer::bench {

struct PerftestResult {
    bool ok = false;
    double value =
        0;  ///< bandwidth tests: MB/s as ucx_perftest prints them (2^20 bytes); latency: us
    std::string error;  ///< why not ok
};

struct CommandOutput {
    int status = -1;   ///< as pclose() returns it; -1 when the command could not start
    std::string text;  ///< stdout and stderr
};
/// Runs `command` through the shell with stderr joined to stdout.
CommandOutput run_command(const std::string& command);
/// The last non-empty line of a program's output (its error message, usually).
std::string last_line(const std::string& text);

/// test: ucp_am_bw, ucp_am_lat, tag_bw, tag_lat ...
/// extra: more options for both sides, e.g. "-e" (endpoints with error handling).
/// env: variables for both sides, e.g. "UCX_RNDV_THRESH=inf" (beside the inherited environment).
PerftestResult run_perftest(const std::string& program, const std::string& test, std::size_t bytes,
                            int iterations, const std::string& extra = {},
                            const std::string& env = {});

}  // namespace gossamer::bench
