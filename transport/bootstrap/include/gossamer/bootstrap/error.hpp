#pragma once
/// The one exception the bootstrap throws for a failed start-up: port in use, unreachable
/// rendezvous, refused handshake, missing peers, malformed bytes. Its message is one line naming
/// the peers concerned and the reason; reason() and ranks() let callers react programmatically.

#include <string>
#include <string_view>
#include <vector>

#include "gossamer/core/error.hpp"

namespace gossamer::bootstrap {

/// Why a bootstrap step failed. The numeric values travel in refusals (docs/modules/bootstrap.md).
enum class Reason : unsigned {
    address_in_use = 1,       ///< this peer's port is taken
    cannot_listen = 2,        ///< this peer's host:port cannot be bound (not a local address...)
    unreachable = 3,          ///< the rendezvous never answered within the timeout
    version_mismatch = 4,     ///< the peers speak different protocol versions
    job_mismatch = 5,         ///< the peers belong to different jobs
    wrong_token = 6,          ///< the job tokens differ
    peer_list_mismatch = 7,   ///< the peers were started with different topology files
    model_size_mismatch = 8,  ///< the models have different parameter counts
    layout_mismatch = 9,      ///< the partition layouts differ
    duplicate_rank = 10,      ///< two processes claim the same rank
    not_rendezvous = 11,      ///< a handshake reached a peer that is not rank 0
    malformed = 12,           ///< bytes that are not the bootstrap protocol
    missing_peers = 13,       ///< the start-up barrier timed out; ranks() are the absent ones
    connection_lost = 14,     ///< the rendezvous went away during start-up
    bad_rank = 15,            ///< this peer's rank is out of range
    late_join = 16,           ///< a handshake arrived after the start-up barrier
    setting_mismatch = 17,    ///< a setting of the job differs (the text names the field)
    not_coordinator = 18,     ///< a rejoin reached a peer that still follows another coordinator
    not_member = 19,          ///< a rejoin from a rank the coordinator already declared lost
};

/// "wrong_token", "missing_peers", ...
std::string_view to_string(Reason reason) noexcept;

class BootstrapError : public Error {
  public:
    /// @param ranks the peers the failure is about: the missing ranks, the peer that refused
    ///              or could not be reached (0), this peer when it cannot listen
    BootstrapError(Reason reason, std::vector<int> ranks, const std::string& message);

    Reason reason() const noexcept { return reason_; }
    const std::vector<int>& ranks() const noexcept { return ranks_; }

  private:
    Reason reason_;
    std::vector<int> ranks_;
};

}  // namespace gossamer::bootstrap
