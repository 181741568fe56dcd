// The majority rule and the pause watch (membership.hpp).
#include "gossamer/peer/membership.hpp"

#include <algorithm>

namespace gossamer::peer {

Majority majority(std::size_t reachable, std::size_t members) noexcept {
    return Majority{std::min(reachable, members), members, members / 2 + 1};
}

void PauseWatch::tick(Clock::time_point now) noexcept {
    longest_ = std::max(longest_, now - last_);
    last_ = now;
}

}  // namespace gossamer::peer
