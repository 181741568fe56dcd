#pragma once
/// Who may write a job's result (docs/modules/peer.md, "Membership"): the majority rule, and the
/// watch on a peer's own loop that tells it it was paused for longer than the others wait for it.
/// Pure and cheap: no I/O, no threads.

#include <chrono>
#include <cstddef>
#include <vector>

namespace gossamer::peer {

/// The majority rule: `reachable` peers (this one included) may write the job's result only if
/// they are a strict majority of `members`, the job's membership. A half, or fewer, writes
/// nothing: the other half may hold a result of its own.
struct Majority {
    std::size_t reachable = 0;
    std::size_t members = 0;
    std::size_t needed = 1;  ///< members / 2 + 1
    bool met() const noexcept { return reachable >= needed; }
};

/// `reachable` of `members` peers (members >= 1; reachable <= members).
Majority majority(std::size_t reachable, std::size_t members) noexcept;

/// The majority rule against the job's last agreed view (bootstrap::View's members): the
/// survivors counted are those in the view; a survivor rank 0 already removed does not count.
Majority majority_of_view(const std::vector<int>& survivors, const std::vector<int>& view);

/// Watches one loop for gaps: tick() on every iteration. A gap between two ticks longer than
/// `limit` (the heartbeat timeout) means this process or its host was stopped long enough for
/// the others to declare it lost. Single thread: the loop's own.
class PauseWatch {
  public:
    using Clock = std::chrono::steady_clock;
    explicit PauseWatch(Clock::duration limit, Clock::time_point now = Clock::now()) noexcept
        : limit_(limit), last_(now) {}

    /// One iteration of the loop, at `now`.
    void tick(Clock::time_point now = Clock::now()) noexcept;
    /// Starts measuring again at `now`, after work that legitimately does not tick.
    void restart(Clock::time_point now = Clock::now()) noexcept { last_ = now; }
    /// Forgets the gaps so far (the peer asked and is still a member) and measures from `now`.
    void clear(Clock::time_point now = Clock::now()) noexcept {
        longest_ = Clock::duration{0};
        last_ = now;
    }
    /// Whether some gap so far was longer than the limit.
    bool paused() const noexcept { return longest_ > limit_; }
    /// The longest gap so far.
    Clock::duration longest() const noexcept { return longest_; }
    Clock::duration limit() const noexcept { return limit_; }

  private:
    Clock::duration limit_;
    Clock::time_point last_;
    Clock::duration longest_{0};
};

}  // namespace gossamer::peer
