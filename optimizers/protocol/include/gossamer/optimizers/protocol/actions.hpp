#pragma once
/// What a protocol answers an event with: sends, deadlines, refusals, start/done.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gossamer/optimizers/local/worker.hpp"
#include "gossamer/transport/message.hpp"

namespace gossamer::proto {

using transport::Message;
using transport::MessageKind;

struct Send {
    Message msg;
    std::uint64_t id = 0;  ///< echoed by send_completed
    /// Zero-copy sends only (Protocol::enable_zero_copy): the payload is this memory of the
    /// protocol's, msg.payload is empty; it stays valid and unchanged until send_completed.
    std::span<const float> borrowed{};
};

struct Deadline {
    Time at = 0;
    std::uint64_t id = 0;  ///< echoed by deadline_reached
};

/// A message the protocol refused (docs/operations/reliability.md, "Non-finite values"): its sender
/// is treated as failed from then on. Drivers log it and write it to the metrics.
struct Refusal {
    int sender = -1;
    MessageKind kind = MessageKind::control;
    std::int64_t round = 0;
    std::uint32_t partition = 0;
    std::string reason;  ///< what was wrong, e.g. "NaN at element 17 of partition 0"
};

/// What a protocol asks of its driver after one event.
struct Actions {
    std::vector<Send> sends;
    bool start_step = false;  ///< compute the next gradient at compute_point()
    std::vector<Deadline> deadlines;
    bool done = false;  ///< this peer has taken its last step and sends nothing more
    /// Messages refused in this event; each sender is treated as failed (the protocol already
    /// took the failure: drivers only report it and must not deliver peer_failed for it again).
    std::vector<Refusal> refused;
};

}  // namespace gossamer::proto
