// sgp's checkpoints (docs/operations/checkpoint.md). Shares in flight at a cut would be lost or
// counted twice, so at a checkpoint step S a peer quiesces before it saves: it starts no step S
// until it has absorbed every round before S from every live in-neighbour (its frontier reaches S -
// 1, the condition of staleness 0) and its outbox is empty (every share it pushed before the cut
// has left). Shares of rounds >= S, which neighbours that cut first push meanwhile, are held until
// this peer has cut, then taken. The masses saved at S therefore add up to the job's with nothing
// in flight: sum w = n (minus what failed peers took).
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "gossamer/optimizers/protocols/sgp/sgp.hpp"

namespace gossamer::proto {

std::int64_t Sgp::next_cut() const {
    const std::int64_t every = checkpoint_every();
    if (every <= 0) return std::numeric_limits<std::int64_t>::max();
    const std::int64_t s = (cut_at_ / every + 1) * every;
    return s < context().max_steps ? s : std::numeric_limits<std::int64_t>::max();
}

bool Sgp::hold_for_cut(Message& msg) {
    if (msg.round < next_cut()) return false;
    held_.push_back(std::move(msg));
    return true;
}

bool Sgp::try_cut() {
    if (!checkpoint_due(t_) || cut_at_ >= t_) return true;
    if (frontier_ < t_ - 1 || outbox_.pending() > 0) return false;
    absorb_buffer();  // empty: no step runs
    cut(t_);
    cut_at_ = t_;
    // What belongs after the cut, in the order it came (on_message's bookkeeping, then one
    // frontier update); a later cut's shares are held again.
    std::vector<Message> later;
    later.swap(held_);
    for (Message& m : later) {
        if (hold_for_cut(m)) continue;
        accept_share(m);
    }
    advance_frontier();
    return true;
}

void Sgp::save_state(StateWriter& w) const {
    w.i64(t_);
    w.i64(frontier_);
    w.f64(w_);
    w.u64(next_seq_.size());
    for (const auto& [j, seq] : next_seq_) {
        w.u32(static_cast<std::uint32_t>(j));
        w.u64(seq);
    }
    w.u64(seen_.size());
    for (const auto& [j, s] : seen_) {
        w.u32(static_cast<std::uint32_t>(j));
        w.i64(s.round);
        w.f64(s.mass);
    }
    w.u64(last_round_.size());
    for (const auto& [j, r] : last_round_) {
        w.u32(static_cast<std::uint32_t>(j));
        w.i64(r);
    }
    w.u64(heard_.size());
    for (const auto& [r, j] : heard_) {
        w.i64(r);
        w.u32(static_cast<std::uint32_t>(j));
    }
}

void Sgp::restore_state(StateReader& r) {
    t_ = r.counter("sgp steps");
    frontier_ = r.counter("sgp frontier");
    w_ = r.f64("sgp weight");
    if (!(w_ > 0) || !std::isfinite(w_)) r.fail(fmt::format("sgp weight {} is not > 0", w_));
    if (frontier_ != t_ - 1)
        r.fail(fmt::format("sgp frontier {} after {} steps is not a quiescent cut", frontier_, t_));
    const auto peers = static_cast<std::uint64_t>(n());
    const auto peer = [&](const char* what) {
        const auto j = r.u32(what);
        if (j >= peers || static_cast<int>(j) == rank())
            r.fail(fmt::format("{} {} is not a peer of this job", what, j));
        return static_cast<int>(j);
    };
    for (auto k = r.count("sgp out-edges", peers); k > 0; --k) {
        const int j = peer("an out-edge's receiver");
        next_seq_[j] = r.u64("an out-edge's sequence number");
    }
    for (auto k = r.count("sgp senders", peers); k > 0; --k) {
        const int j = peer("a sender");
        Seen& s = seen_[j];
        s.round = r.counter("a sender's round");
        s.mass = r.f64("a sender's mass");
    }
    for (auto k = r.count("sgp outbox rounds", peers); k > 0; --k) {
        const int j = peer("an outbox sender");
        last_round_[j] = r.counter("an outbox round");
    }
    heard_.clear();
    for (auto k = r.count("sgp rounds heard", std::uint64_t{1} << 20); k > 0; --k) {
        const auto round = r.counter("a round heard");
        heard_.emplace_back(round, peer("a sender heard"));
    }
}

}  // namespace gossamer::proto
