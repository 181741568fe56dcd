// dpsgd's checkpoints (docs/operations/checkpoint.md). The cut is at the start of a round t
// (begin_round): every round before t is mixed, so each in-edge's replica holds its sender's state
// of round t - 1 and each out-edge's x_hat what its receiver holds; round t's messages have not
// left (atc sends them when step t ends, cta right after the cut). Messages of round t that arrived
// early are queued, never applied (advance() stops at the round being mixed), and are not saved:
// after a resume their senders send them again, the same bytes. A full model of round t that
// arrived early was applied at once; its sender's copy is then numbered as already covered and
// dropped.
#include <fmt/format.h>

#include "gossamer/optimizers/protocols/dpsgd/dpsgd.hpp"

namespace gossamer::proto {

std::string Dpsgd::resume_refusal() const {
    if (options_.delay > 0)
        return "algorithm dpsgd with delay 1 cannot checkpoint and resume (its gradient of the "
               "round in flight has no cut); use delay 0";
    if (options_.chunk_bytes.bytes > 0 || options_.chunk_bytes.automatic ||
        options_.partition_ready)
        return "algorithm dpsgd with chunk_bytes or partition_ready cannot checkpoint and resume "
               "yet (a cut between chunks is not built); drop those options";
    if (options_.reweight)
        return "algorithm dpsgd with reweight cannot checkpoint and resume (its mixes depend on "
               "arrival times); drop the reweight option";
    return "";
}

void Dpsgd::save_state(StateWriter& w) const {
    w.i64(t_);
    w.i64(sent_);
    w.u64(resync_requests_);
    w.u64(resync_answers_);
    w.u64(channels_.size());
    for (const Channel& c : channels_) {
        w.i64(c.round);
        w.u64(c.out.size());
        for (const auto& [j, e] : c.out) {
            w.u32(static_cast<std::uint32_t>(j));
            e.save(w);
        }
        w.u64(c.in.size());
        for (const auto& [j, e] : c.in) {
            w.u32(static_cast<std::uint32_t>(j));
            e.save(w);
        }
    }
}

void Dpsgd::restore_state(StateReader& r) {
    t_ = r.counter("dpsgd round");
    sent_ = r.counter("dpsgd rounds sent");
    if (t_ < 0 || sent_ != t_)
        r.fail(fmt::format("dpsgd round {} with {} rounds sent is not a cut", t_, sent_));
    resync_requests_ = r.u64("dpsgd re-sync requests");
    resync_answers_ = r.u64("dpsgd re-sync answers");
    const auto channels = r.u64("dpsgd channels");
    if (channels != channels_.size())
        r.fail(fmt::format("{} gossip channels in the checkpoint, {} in this job", channels,
                           channels_.size()));
    const auto peer = [&](const char* what) {
        const auto j = r.u32(what);
        if (j >= static_cast<std::uint32_t>(n()) || static_cast<int>(j) == rank())
            r.fail(fmt::format("{} {} is not a peer of this job", what, j));
        return static_cast<int>(j);
    };
    for (Channel& c : channels_) {
        c.round = r.counter("a channel's round");
        c.out.clear();
        c.in.clear();
        for (auto k = r.count("out-edges", static_cast<std::uint64_t>(n())); k > 0; --k) {
            const int j = peer("an out-edge's receiver");
            auto it = c.out
                          .emplace(j, ReplicaSender(j, c.size, worker().math(), c.compressor.get(),
                                                    stream(c, rank(), j), worker().device()))
                          .first;
            it->second.restore(r);
        }
        for (auto k = r.count("in-edges", static_cast<std::uint64_t>(n())); k > 0; --k) {
            const int j = peer("an in-edge's sender");
            receiver(c, j).restore(r);
        }
    }
    stage_ = Stage::idle;
}

}  // namespace gossamer::proto
