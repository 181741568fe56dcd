#pragma once
/// What the subcommands of `gossamer lab` share (lab_command.cpp): the options that choose a lab's
/// caps, the lab they describe, and the check that this machine can build one.

#include <string>
#include <vector>

#include "args.hpp"
#include "gossamer/lab/spec.hpp"

namespace gossamer::cli {

/// --peers, --rate and --cluster.
extern const std::vector<OptionSpec> kSpecOptions;

struct SpecChoice {
    lab::LabSpec spec;
    std::string source;  // for messages: "8 peers at 1 Gbit/s" or the file
    bool latency = false;
};

/// The lab the options describe, validated; UsageError for a bad or conflicting option.
SpecChoice spec_from_args(const ParsedArgs& a);

/// UsageError naming `command` when root or iproute2 is missing.
void require_lab(const std::string& command);

// lab_hold_command.cpp
int lab_up(const std::vector<std::string>& args);
int lab_down(const std::vector<std::string>& args);
int lab_clean(const std::vector<std::string>& args);

}  // namespace gossamer::cli
