#pragma once
/// The membership rules of docs/modules/peer.md ("Membership") for a peer joined over the
/// bootstrap: `gossamer peer` and gossamer::Peer over UCX apply them the same way. Communication
/// thread.

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gossamer/core/error.hpp"
#include "gossamer/peer/join.hpp"
#include "gossamer/peer/membership.hpp"

namespace gossamer::peer {

/// This peer is no longer part of the job: rank 0 declared it lost, it was paused past its
/// loss and could not confirm it is still a member, or it cannot reach a majority of the job's
/// view. It must leave without writing a result (`gossamer peer` exits with status 4).
class NotMember : public Error {
  public:
    using Error::Error;
};

class MembershipGuard {
  public:
    /// `me` must outlive the guard; the heartbeat settings are the ones `me` joined with.
    MembershipGuard(JoinedPeer& me, const bootstrap::Options& joined_with);

    /// Whenever the loop wakes: measures the gap since the last call (PauseWatch) and throws
    /// NotMember when rank 0 expelled this peer, or when, after a gap past the heartbeat
    /// timeout, the peer finds others lost and rank 0 does not confirm it is still a member
    /// (it asks: Bootstrap::confirm_membership). `say` gets the line of a confirmation.
    void check();
    /// After work that legitimately does not call check() (evaluation, copying the model).
    void restart() { pause_.restart(); }

    /// The survivors this peer would average over (itself and every rank neither its transport
    /// nor its bootstrap lost), ascending.
    std::vector<int> survivors();
    /// The majority rule against the last agreed view: nullopt when `survivors` may write a
    /// result, else the line why not. Waits at most two heartbeat intervals for a view rank 0
    /// is still installing (refreshing `survivors`).
    std::optional<std::string> minority(std::vector<int>& survivors);

    /// Where a confirmation line goes (default: log::info).
    std::function<void(const std::string&)> say;

  private:
    std::string paused_text() const;

    JoinedPeer& me_;
    bootstrap::Millis interval_, timeout_, io_timeout_;
    PauseWatch pause_;
};

}  // namespace gossamer::peer
