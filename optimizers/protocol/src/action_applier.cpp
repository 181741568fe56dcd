#include "gossamer/optimizers/protocol/action_applier.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "gossamer/core/error.hpp"

namespace gossamer::proto {

void ActionApplier::apply(const Protocol& protocol, Time now, Actions& a, ActionTarget& target) {
    for (const auto& r : a.refused) target.refused(r);  // docs/operations/reliability.md
    const bool bounded = protocol.one_in_flight_per_edge();
    for (auto& s : a.sends) {
        const bool counted = bounded && s.msg.kind != MessageKind::control;
        if (counted && !edges_.sent(s.msg)) {
            const int rank = protocol.rank();
            throw Error(fmt::format(
                "{}: {} {} sent a second {} on edge {} -> {}{} while one is in flight; the "
                "protocol keeps at most one in flight per edge",
                protocol.name(), wording_.peer, rank, transport::to_string(s.msg.kind), rank,
                s.msg.receiver, wording_.timed ? fmt::format(" at {:.6f} s", now) : ""));
        }
        target.send(s, counted);
    }
    for (const auto& d : a.deadlines) target.deadline(std::max(d.at, now), d.id);
    if (a.start_step) target.start_step();
    if (a.done && !done_) {
        done_ = true;
        target.done();
    }
}

}  // namespace gossamer::proto
