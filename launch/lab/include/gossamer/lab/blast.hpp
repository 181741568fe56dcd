#pragma once
/// A TCP traffic generator between the lab's peers, bounded in bytes and in seconds: a sender
/// and a receiver thread per flow, each in its peer's namespace (setns), so the bytes cross the
/// shaped veths. For `gossamer lab check` and the shaping tests.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gossamer/lab/lab.hpp"

namespace gossamer::lab {

/// One flow: peer `from` sends to peer `to` as fast as TCP lets it.
struct Flow {
    int from = 0;
    int to = 0;
};

struct FlowResult {
    Flow flow;
    std::uint64_t sent = 0;      ///< bytes the sender wrote
    std::uint64_t received = 0;  ///< bytes the receiver read
    std::string error;           ///< empty when the flow ran; else what went wrong
    /// Seconds from the common start (every sender connected) to the receiver's last byte;
    /// NaN when nothing arrived. With start_together, the time the flow took.
    double seconds = 0.0;
};

struct BlastOptions {
    double seconds = 3.0;                  ///< how long every sender sends (> 0, <= 600)
    std::uint64_t max_bytes = 1ull << 36;  ///< per flow; the sender stops at this count
    int base_port = 52000;                 ///< flow k listens on base_port + k
    double connect_timeout_s = 5.0;
    /// Senders hold their first byte until every flow is connected, so that the flows start
    /// within a millisecond of each other (for timing each flow; FlowResult::seconds).
    bool start_together = false;
    /// Called once, from the calling thread, when every flow is connected and sending; the
    /// measurement window runs inside it (it may sleep). The senders stop when it returns
    /// (at the latest `seconds` + 30 s after it was called), so the window never sees them end.
    std::function<void()> while_sending;
};

/// Runs the flows at once over `lab` and returns each flow's counts. Errors of a flow (refused,
/// timed out) are reported in its result, never thrown; every thread ends within
/// seconds + connect_timeout_s + a few seconds.
std::vector<FlowResult> blast(const Lab& lab, const std::vector<Flow>& flows,
                              const BlastOptions& options);

}  // namespace gossamer::lab
