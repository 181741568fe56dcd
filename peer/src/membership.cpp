// The majority rule and the pause watch (membership.hpp).
#include "gossamer/peer/membership.hpp"

#include <algorithm>

namespace gossamer::peer {

Majority majority(std::size_t reachable, std::size_t members) noexcept {
    return Majority{std::min(reachable, members), members, members / 2 + 1};
}

Majority majority_of_view(const std::vector<int>& survivors, const std::vector<int>& view) {
    std::size_t in_view = 0;
    for (int r : survivors) in_view += std::find(view.begin(), view.end(), r) != view.end();
    return majority(in_view, std::max<std::size_t>(view.size(), 1));
}

void PauseWatch::tick(Clock::time_point now) noexcept {
    longest_ = std::max(longest_, now - last_);
    last_ = now;
}

}  // namespace gossamer::peer
