// The rack-aware all-reduce (hierarchical.hpp): allreduce's ring schedule run three times, inside
// the rack, across racks and inside the rack again, as one sequence of steps.
#include "gossamer/optimizers/protocols/allreduce/hierarchical.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "gossamer/core/error.hpp"

namespace gossamer::proto {

int hier_steps(int n, int k) noexcept {
    return 2 * (k - 1) + 2 * (n / k - 1);
}

HierStep hier_step(std::size_t length, int n, int k, int rank, int t) noexcept {
    const int racks = n / k, g = rank / k, i = rank % k, base = g * k;
    const int a = k - 1, b = 2 * (racks - 1);  // phase A's steps, phase B's
    HierStep out;
    if (t < a || t >= a + b) {  // the rack's ring: reduce-scatter (A), then all-gather (C)
        const ring::Step s = ring::step(i, k, t < a ? t : t - b);
        out.send_to = base + s.send_to;
        out.recv_from = base + s.recv_from;
        out.send = ring::segment(length, k, s.send_segment);
        out.recv = ring::segment(length, k, s.recv_segment);
        out.reduce = s.reduce;
        return out;
    }
    // Phase B: the ring of position i across the racks, over the rack segment i owns.
    const ring::Range w = ring::segment(length, k, ring::owned_segment(i, k));
    const ring::Step s = ring::step(g, racks, t - a);
    out.send_to = s.send_to * k + i;
    out.recv_from = s.recv_from * k + i;
    out.send = ring::split(w, racks, s.send_segment);
    out.recv = ring::split(w, racks, s.recv_segment);
    out.reduce = s.reduce;
    return out;
}

std::pair<ring::Range, int> hier_owned(std::size_t length, int n, int k, int rank) noexcept {
    const int racks = n / k, g = rank / k, i = rank % k;
    const ring::Range w = ring::segment(length, k, ring::owned_segment(i, k));
    if (racks > 1) return {ring::split(w, racks, ring::owned_segment(g, racks)), k - 1 + racks - 2};
    if (k > 1) return {w, k - 2};
    return {w, -1};
}

HierarchicalAllreduce::HierarchicalAllreduce(PeerContext ctx, AllreduceOptions options)
    : Protocol(std::move(ctx)),
      options_(options),
      math_(worker().math()),
      length_(worker().size()),
      k_(options.rack_size) {
    if (k_ < 1 || n() % k_ != 0)
        throw ConfigError("", "hierarchy.rack_size",
                          fmt::format("rack size {} does not divide the {} peers", k_, n()),
                          "racks are rack_size consecutive ranks: use a divisor of n (e.g. 8 for "
                          "1,024 peers)");
    if (options_.chunks != 1 || options_.elastic != AllreduceOptions::Elastic::stop)
        throw ConfigError("", "hierarchy", "runs with one chunk per segment and no elastic mode",
                          "drop \"chunks\" and \"elastic\", or \"hierarchy\"");
    if (worker().device())
        throw ConfigError("", "hierarchy",
                          "the rack-aware all-reduce keeps its vectors in host "
                          "memory",
                          "run it with parameters on the host, or drop \"hierarchy\"");
    steps_ = hier_steps(n(), k_);
    owned_ = hier_owned(length_, n(), k_, rank());
}

void HierarchicalAllreduce::on_start(Time, Actions& out) {
    next_step(out);
}

void HierarchicalAllreduce::on_step_finished(Time, double, Actions& out) {
    if (done()) return;
    ++steps_finished_;
    if (options_.period == 1) return begin(worker().gradient(), out);
    // Local SGD: the peer's own step, then a model average every period steps and at the end.
    worker().apply_gradient(params(), worker().gradient());
    if (steps_finished_ % options_.period == 0 || steps_finished_ >= context().max_steps)
        begin(params(), out);
    else
        next_step(out);
}

void HierarchicalAllreduce::begin(std::span<const float> local, Actions& out) {
    if (math_) acc_.assign(local.begin(), local.end());
    active_ = true;
    next_ = 0;
    if (steps_ > 0) send_step(0, out);
    progress(out);
}

void HierarchicalAllreduce::send_step(int t, Actions& out) {
    const HierStep s = hier_step(length_, n(), k_, rank(), t);
    Message msg;
    msg.kind = MessageKind::reduce;
    msg.receiver = s.send_to;
    msg.round = round_;
    msg.chunk = static_cast<std::uint32_t>(t);
    msg.offset = s.send.begin;
    msg.elements = s.send.size();
    msg.edge_seq = edge_seq_[s.send_to]++;
    if (math_) msg.payload.assign(acc_.begin() + s.send.begin, acc_.begin() + s.send.end);
    send(out, std::move(msg));
}

void HierarchicalAllreduce::on_message(Time, Message msg, Actions& out) {
    if (done()) return;
    const auto bad = [&](const std::string& what) {
        throw Error(
            fmt::format("allreduce (hierarchy): rank {} got a bad message from rank {} "
                        "(round {}, step {}): {}",
                        rank(), msg.sender, msg.round, msg.chunk, what));
    };
    if (msg.kind != MessageKind::reduce) bad("kind is not reduce");
    if (msg.round < round_) bad(fmt::format("round {} is over", msg.round));
    if (msg.chunk >= static_cast<std::uint32_t>(steps_)) bad("step past the schedule");
    const int t = static_cast<int>(msg.chunk);
    const HierStep s = hier_step(length_, n(), k_, rank(), t);
    if (msg.sender != s.recv_from) bad(fmt::format("rank {} sends this step", s.recv_from));
    if (msg.offset != s.recv.begin || msg.elements != s.recv.size())
        bad(fmt::format("expected elements [{}, {})", s.recv.begin, s.recv.end));
    if (msg.payload.size() != (math_ ? s.recv.size() : 0)) bad("payload size");
    if (!pending_.emplace(std::make_pair(msg.round, t), std::move(msg)).second)
        bad("received twice");
    if (active_) progress(out);
}

void HierarchicalAllreduce::progress(Actions& out) {
    // The owner of a part divides its full sum by n once (before any step when n = 1).
    const auto average_owned = [&] {
        if (!math_) return;
        const auto div = static_cast<float>(n());
        for (std::size_t e = owned_.first.begin; e < owned_.first.end; ++e) acc_[e] /= div;
    };
    if (active_ && next_ == 0 && owned_.second < 0) average_owned();
    while (active_ && next_ < steps_) {
        const auto it = pending_.find({round_, next_});
        if (it == pending_.end()) return;
        const Message msg = std::move(it->second);
        pending_.erase(it);
        const HierStep s = hier_step(length_, n(), k_, rank(), next_);
        if (math_) {
            float* a = acc_.data() + s.recv.begin;
            const float* v = msg.payload.data();
            if (s.reduce)
                for (std::size_t e = 0; e < msg.payload.size(); ++e) a[e] += v[e];
            else
                std::copy(v, v + msg.payload.size(), a);
        }
        if (next_ == owned_.second) average_owned();
        if (++next_ < steps_) send_step(next_, out);
    }
    if (!active_) return;
    active_ = false;
    ++round_;
    ++mutable_stats().rounds;
    if (options_.period == 1) {
        worker().apply_gradient(params(), acc_);
    } else if (math_) {
        auto x = params();
        std::copy(acc_.begin(), acc_.end(), x.begin());
    }
    next_step(out);
}

void HierarchicalAllreduce::on_peer_failed(Time, int dead, Actions& out) {
    if (done()) return;
    failed_rank_ = dead;
    pending_.clear();
    active_ = false;
    out.done = true;
}

void HierarchicalAllreduce::next_step(Actions& out) {
    if (steps_finished_ >= context().max_steps)
        out.done = true;
    else
        out.start_step = true;
}

}  // namespace gossamer::proto
