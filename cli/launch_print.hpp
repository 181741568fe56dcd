#pragma once
/// What `gossamer launch` prints: the comparison table (launch_print.cpp); the job is launch/'s.

#include <string>
#include <vector>

#include "gossamer/launch/launch_job.hpp"

namespace gossamer::cli {

/// One row per algorithm: time to target (an accuracy, or a loss at most X), times, the final
/// accuracy and loss (text data: bits and nats per character), MB sent, idle, peers lost.
std::string launch_table(const launch::LaunchJob& job, const std::vector<launch::LaunchRow>& rows);

}  // namespace gossamer::cli
