// choco's partition-ready path (docs/algorithms/protocol-contract.md, "Partition-ready"), as
// dpsgd's: while step t runs, a channel whose partitions the compute side has declared ready takes
// its consensus step (delayed: round t - 1; the plain rule mixes only after it sent) once that
// round is in, the ready partitions take their optimizer step, and a channel whose partitions have
// all stepped sends round t's Q(x - x_hat) (moving x_hat as the step end would), all before the
// step ends. The step end does the rest exactly as without the event: the same values, earlier
// sends.
#include <algorithm>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocols/choco/choco.hpp"

namespace gossamer::proto {

bool Choco::takes_partition_ready() const {
    return options_.partition_ready && proto::takes_partition_ready(*context().worker);
}

void Choco::check_ready_option() const {
    check_partition_ready_option(options_.partition_ready, *context().worker);
}

void Choco::on_partition_ready(Time now, std::uint32_t, Actions& out) {
    advance_ready(now, out);
}

void Choco::reset_ready() {
    std::fill(early_mixed_.begin(), early_mixed_.end(), 0);
    std::fill(early_sent_.begin(), early_sent_.end(), 0);
    std::fill(stepped_.begin(), stepped_.end(), 0);
}

bool Choco::round_in(Channel& c) {
    // As try_mix's check, for one channel: every live in-neighbour's round c.round is applied.
    const auto round = context().topology->at(c.round);
    for (int j : round->graph.in_neighbors(rank())) {
        if (dead_.contains(j)) continue;
        InEdge& e = c.in[j];
        advance(c, j, e);
        if (e.covered < c.round) return false;
    }
    return true;
}

void Choco::advance_ready(Time now, Actions& out) {
    if (!stepping() || !takes_partition_ready()) return;
    const PartitionLayout& parts = *worker().partitions();
    if (channel_parts_.size() != channels_.size()) {
        channel_parts_.clear();
        for (const Channel& c : channels_) {
            std::size_t first = parts.count(), last = 0;
            for (std::size_t p = 0; p < parts.count(); ++p)
                if (parts[p].offset < c.offset + c.size && c.offset < parts[p].end())
                    first = std::min(first, p), last = std::max(last, p);
            channel_parts_.emplace_back(first, last);
        }
        early_mixed_.assign(channels_.size(), 0);
        early_sent_.assign(channels_.size(), 0);
        stepped_.assign(parts.count(), 0);
    }
    // Delayed: round sent_ - 1 waits to be mixed at this step's end (none before the first).
    const bool mix_pending = options_.delay > 0 && sent_ > t_;
    for (Channel& c : channels_) {
        if (!mix_pending || early_mixed_[c.slot] || !range_ready(c.offset, c.size)) continue;
        if (!round_in(c)) continue;
        mix_channel(c);
        early_mixed_[c.slot] = 1;
    }
    const auto x = context().worker->params();  // step_partition writes only ready ranges
    for (std::size_t p = 0; p < parts.count(); ++p) {
        if (stepped_[p] || !partition_is_ready(p)) continue;
        bool mixed = true;
        for (const Channel& c : channels_)
            if (channel_parts_[c.slot].first <= p && p <= channel_parts_[c.slot].second)
                mixed = mixed && (!mix_pending || early_mixed_[c.slot]);
        if (!mixed) continue;
        if (worker().step_partition(p, x, worker().gradient())) stepped_[p] = 1;
    }
    for (Channel& c : channels_) {
        if (early_sent_[c.slot]) continue;
        bool stepped = true;
        for (std::size_t p = channel_parts_[c.slot].first; p <= channel_parts_[c.slot].second; ++p)
            stepped = stepped && stepped_[p];
        if (!stepped) continue;
        send_channel(now, c, out);  // round c.round, as the step end would send it
        early_sent_[c.slot] = 1;
        ++early_sends_;
    }
}

}  // namespace gossamer::proto
