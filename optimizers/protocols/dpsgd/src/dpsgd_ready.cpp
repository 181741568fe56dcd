// dpsgd's partition-ready path (docs/algorithms/protocol-contract.md, "Partition-ready"): while
// step t runs, a channel whose partitions the compute side has declared ready is mixed (cta: round
// t; delayed atc: round t - 1; plain atc mixes only after it sent) once that round is in, the ready
// partitions take their optimizer step, and a channel whose partitions have all stepped leaves
// as the next round's message (cta: t + 1; atc: t), all before the step ends. The step end does
// the rest exactly as without the event, so the values are the same; only sends are earlier.
#include <algorithm>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocols/dpsgd/dpsgd.hpp"

namespace gossamer::proto {

bool Dpsgd::takes_partition_ready() const {
    return options_.partition_ready && proto::takes_partition_ready(*context().worker);
}

void Dpsgd::check_ready_option() const {
    check_partition_ready_option(options_.partition_ready, *context().worker);
}

void Dpsgd::on_partition_ready(Time now, std::uint32_t, Actions& out) {
    advance_ready(now, out);
}

void Dpsgd::reset_ready() {
    std::fill(early_mixed_.begin(), early_mixed_.end(), 0);
    std::fill(early_sent_.begin(), early_sent_.end(), 0);
    std::fill(stepped_.begin(), stepped_.end(), 0);
}

bool Dpsgd::mix_ready(Channel& c) {
    // As try_mix for one channel (the delayed rule has no reweighting): every live in-neighbour's
    // replica must hold round c.round.
    const int i = rank();
    const auto round = context().topology->at(c.round);
    double self = round->weights.at(i, i);
    std::vector<std::pair<int, double>> weights;
    for (int j : round->graph.in_neighbors(i)) {
        const double w = round->weights.at(i, j);
        if (dead_.contains(j)) {
            self += w;
            continue;
        }
        ReplicaReceiver& r = receiver(c, j);
        r.advance(c.round);
        if (!r.covers(c.round)) return false;
        weights.emplace_back(j, w);
    }
    mix_channel(c, context().worker->params(), self, std::move(weights));
    return true;
}

void Dpsgd::advance_ready(Time now, Actions& out) {
    if (!stepping() || !takes_partition_ready()) return;
    const PartitionLayout& parts = *worker().partitions();
    if (channel_parts_.size() != channels_.size()) {
        // The partitions each channel overlaps: both are sorted by offset.
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
    // What this step's end mixes before its optimizer step: cta round t (x_t, which the compute
    // side reads until a partition is ready), delayed round t - 1 (none before the first step);
    // plain atc steps first and mixes after it sent.
    const bool cta = options_.mode == DpsgdMode::cta;
    const bool mix_pending = cta || (options_.delay > 0 && sent_ > t_);
    // cta sends round t + 1 early only if there is a step t + 1 to mix it.
    if (cta && t_ + 1 >= context().max_steps) return;
    for (Channel& c : channels_) {
        if (!mix_pending || early_mixed_[c.slot] || !range_ready(c.offset, c.size)) continue;
        if (mix_ready(c)) early_mixed_[c.slot] = 1;
    }
    const auto x = context().worker->params();  // only ready ranges are written below
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
        // The round this step's end would send: c.round, which the early mix advanced as the
        // step-end mix would have.
        send_channel(now, c, x, out);
        early_sent_[c.slot] = 1;
        ++early_sends_;
    }
}

}  // namespace gossamer::proto
