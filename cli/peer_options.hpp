#pragma once
/// gossamer peer's flags (peer_options.cpp): its parser and the flags that need more than
/// ParsedArgs::integer or number.

#include <chrono>
#include <optional>
#include <string>

#include "args.hpp"

namespace gossamer::cli {

/// The parser of `gossamer peer`, with its --help.
const ArgParser& peer_parser();

/// --algorithm NAME: a registered algorithm; UsageError naming the known ones.
std::string check_algorithm(const std::string& name);

/// A positive number of seconds (at most 10^6) as milliseconds, or `fallback` seconds.
std::chrono::milliseconds seconds_option(const ParsedArgs& a, const char* name, double fallback);

/// --job-start T: unix seconds, not in the future (beyond a clock's jitter), only with --cluster
/// (`cluster`); nullopt when not given.
std::optional<std::chrono::system_clock::time_point> job_start_option(const ParsedArgs& a,
                                                                      bool cluster);

}  // namespace gossamer::cli
