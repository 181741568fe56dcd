#include "cluster_churn.hpp"

#include <fmt/format.h>

namespace gossamer {
namespace {

void check_rank(const PeerSpec& p, int r, const FieldNode& at) {
    const bool fails = p.fail_at != never, rejoins = p.rejoin_at != never,
               leaves = p.leave_at != never, late = p.join_at > 0;
    if (rejoins && !fails)
        at(r, "rejoin_at")
            .fail(fmt::format("rank {} has rejoin_at {:g} but no fail_at: only a crashed peer "
                              "rejoins",
                              r, p.rejoin_at),
                  "add \"fail_at\" earlier than rejoin_at, or use \"join_at\" for a peer that "
                  "enters late");
    if (rejoins && p.rejoin_at <= p.fail_at)
        at(r, "rejoin_at")
            .fail(fmt::format("rank {} rejoins at {:g} s but fails only at {:g} s", r, p.rejoin_at,
                              p.fail_at),
                  "make rejoin_at later than fail_at");
    if (late && fails && p.fail_at <= p.join_at)
        at(r, "fail_at")
            .fail(fmt::format("rank {} fails at {:g} s but joins only at {:g} s", r, p.fail_at,
                              p.join_at),
                  "make fail_at later than join_at");
    if (leaves && p.leave_at <= p.join_at)
        at(r, "leave_at")
            .fail(fmt::format("rank {} leaves at {:g} s but joins at {:g} s, so it is never in "
                              "the job",
                              r, p.leave_at, p.join_at),
                  "make leave_at later than join_at (join_at is 0 when not given)");
    if (leaves && fails && !rejoins)
        at(r, "leave_at")
            .fail(fmt::format("rank {} fails at {:g} s and never rejoins, so it cannot leave at "
                              "{:g} s",
                              r, p.fail_at, p.leave_at),
                  "keep one of fail_at and leave_at, or add rejoin_at between them");
    if (leaves && rejoins && p.leave_at <= p.rejoin_at)
        at(r, "leave_at")
            .fail(fmt::format("rank {} leaves at {:g} s, not after it rejoins at {:g} s", r,
                              p.leave_at, p.rejoin_at),
                  "order the times join_at < fail_at < rejoin_at < leave_at");
}

}  // namespace

void check_churn(const std::vector<PeerSpec>& peers, const FieldNode& at) {
    const int n = static_cast<int>(peers.size());
    for (int r = 0; r < n; ++r) check_rank(peers[static_cast<std::size_t>(r)], r, at);
    int first = 0;
    for (int r = 1; r < n; ++r)
        if (peers[static_cast<std::size_t>(r)].join_at <
            peers[static_cast<std::size_t>(first)].join_at)
            first = r;
    if (n > 0 && peers[static_cast<std::size_t>(first)].join_at > 0)
        at(first, "join_at")
            .fail(fmt::format("every peer joins after t = 0 (the first, rank {}, at {:g} s): "
                              "nobody starts the job",
                              first, peers[static_cast<std::size_t>(first)].join_at),
                  "let at least one peer start at t = 0 (drop its join_at)");
}

}  // namespace gossamer
