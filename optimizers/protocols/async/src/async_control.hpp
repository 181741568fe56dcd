#pragma once
// async's control messages carry their meaning in Message::chunk (docs/architecture.md, "async").
// Private to optimizers/protocols/async: async_gossip.cpp, async_state.cpp and async_elastic.cpp
// share them.

#include <algorithm>
#include <cstdint>
#include <limits>

namespace gossamer::proto::async_control {

/// The sender took its last step (or finished leaving); edge_seq: the shares it pushed to the
/// receiver in all.
inline constexpr std::uint32_t kFinished = 0;
/// payload: the sender's {rate, self share}.
inline constexpr std::uint32_t kRate = 1;
/// A checkpoint's marker (async_state.cpp): round S, edge_seq the shares pushed before the cut.
inline constexpr std::uint32_t kCut = 2;
/// Elastic jobs (docs/operations/elastic.md, async_elastic.cpp). The sender entered the job: the
/// receiver counts its edges to it from zero again.
inline constexpr std::uint32_t kJoined = 3;
/// As kJoined, and the receiver is asked to sponsor the sender: split its (x, w) in half with
/// it. edge_seq: 1 for a rejoin (the answer carries no model), 0 for a fresh peer.
inline constexpr std::uint32_t kSponsor = 4;
/// The sender leaves gracefully: send it nothing more and say how many shares were pushed to it.
inline constexpr std::uint32_t kLeaving = 5;
/// The answer to kLeaving; edge_seq: the shares the sender pushed to the leaver in all.
inline constexpr std::uint32_t kLeaveAck = 6;
/// Checkpoint cuts after a join (async_state.cpp): the sender was admitted and proposes, in
/// edge_seq, the first cut at which the edge between them takes part (its first checkpoint step
/// after the step it entered at).
inline constexpr std::uint32_t kAdmitted = 7;
/// The answer to kAdmitted; edge_seq: the edge's first cut (kNoCut: the sender cuts no more).
inline constexpr std::uint32_t kCutFrom = 8;
inline constexpr std::uint64_t kNoCut = ~std::uint64_t{0} >> 1;  // INT64_MAX

/// A share count or step a message or a checkpoint carries, in the 32 bits a neighbour keeps it
/// in (async_gossip.hpp, Neighbour): a job takes at most INT32_MAX steps, so only a count no
/// peer of this job sent saturates.
inline std::int32_t count32(std::uint64_t v) noexcept {
    return static_cast<std::int32_t>(
        std::min<std::uint64_t>(v, std::numeric_limits<std::int32_t>::max()));
}
inline std::int32_t count32(std::int64_t v) noexcept {
    return static_cast<std::int32_t>(std::clamp<std::int64_t>(
        v, std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::max()));
}

}  // namespace gossamer::proto::async_control
