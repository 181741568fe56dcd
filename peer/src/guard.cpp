// The membership rules for a peer joined over the bootstrap (guard.hpp, docs/modules/peer.md).
#include "gossamer/peer/guard.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "gossamer/core/log.hpp"
#include "gossamer/core/ranks_text.hpp"

namespace gossamer::peer {
namespace {

std::string seconds_text(std::chrono::steady_clock::duration d) {
    return fmt::format("{:.1f} s", std::chrono::duration<double>(d).count());
}

}  // namespace

MembershipGuard::MembershipGuard(JoinedPeer& me, const bootstrap::Options& o)
    : me_(me),
      interval_(o.heartbeat_interval),
      timeout_(o.heartbeat_timeout),
      io_timeout_(o.io_timeout),
      // Its last heartbeat may have left up to one interval before the loop stopped.
      pause_(o.heartbeat_timeout - o.heartbeat_interval) {}

std::string MembershipGuard::paused_text() const {
    return fmt::format(
        "this peer was paused for {} (long enough for the {} heartbeat timeout to declare it "
        "lost)",
        seconds_text(pause_.longest()), seconds_text(timeout_));
}

void MembershipGuard::check() {
    pause_.tick();
    me_.apply_peer_losses();
    // Rank 0's notice may arrive at any moment, also while this peer asks: one line either way.
    auto expelled = [&](const std::string& why) {
        return NotMember(
            fmt::format("{}the job's coordinator declared this peer lost ({}); the job carried on "
                        "without it: exiting "
                        "without a result",
                        pause_.paused() ? paused_text() + "; " : "", why));
    };
    if (const auto why = me_.bootstrap().expelled()) throw expelled(*why);
    if (!pause_.paused()) return;
    const auto alive = survivors();
    if (static_cast<int>(alive.size()) == me_.size()) return;  // nobody lost: nothing to judge
    const auto standing = me_.bootstrap().confirm_membership(io_timeout_);
    if (standing == bootstrap::Standing::member) {
        const auto line =
            paused_text() + "; the job's coordinator confirms it is still a member: carrying on";
        if (say)
            say(line);
        else
            log::info("rank {}: {}", me_.rank(), line);
        pause_.clear();
        return;
    }
    if (const auto why = me_.bootstrap().expelled()) throw expelled(*why);
    throw NotMember(
        fmt::format("{}; {}: exiting without a result", paused_text(),
                    standing == bootstrap::Standing::expelled
                        ? "the job's view no longer holds it: the job carried on without it"
                        : "it could not confirm it is still a member (no coordinator answered)"));
}

std::vector<int> MembershipGuard::survivors() {
    me_.apply_peer_losses();
    const auto losses = me_.losses();
    std::vector<int> out;
    for (int q = 0; q < me_.size(); ++q) {
        const bool gone =
            q != me_.rank() &&
            (me_.transport().peer_failed(q) ||
             std::any_of(losses.begin(), losses.end(), [q](const auto& l) { return l.rank == q; }));
        if (!gone) out.push_back(q);
    }
    return out;
}

std::optional<std::string> MembershipGuard::minority(std::vector<int>& alive) {
    auto view = me_.bootstrap().agreed_view();
    auto m = majority_of_view(alive, view.members);
    const auto until = std::chrono::steady_clock::now() + 2 * interval_;
    while (!m.met() && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        alive = survivors();
        view = me_.bootstrap().agreed_view();
        m = majority_of_view(alive, view.members);
    }
    if (m.met()) return std::nullopt;
    return fmt::format(
        "not writing a result: this peer can reach only {} of the {} peers of the job's view {} "
        "(ranks {}; reachable: {}); a result needs a majority ({})",
        m.reachable, m.members, view.number, ranks_text(view.members), ranks_text(alive), m.needed);
}

}  // namespace gossamer::peer
