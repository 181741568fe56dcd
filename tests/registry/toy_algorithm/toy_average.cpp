#include "toy_algorithm/toy_average.hpp"

#include <fmt/format.h>

#include "gossamer/core/error.hpp"

namespace toy {

ToyAverage::ToyAverage(PeerContext ctx) : Protocol(std::move(ctx)), math_(worker().math()) {
    if (!context().topology) throw Error("toy_average needs a topology");
}

void ToyAverage::on_start(Time, Actions& out) {
    next(out);
}

void ToyAverage::next(Actions& out) {
    if (t_ >= context().max_steps)
        out.done = true;
    else
        out.start_step = true;
}

void ToyAverage::on_step_finished(Time, double, Actions& out) {
    worker().apply_gradient(math_ ? params() : std::span<float>{}, worker().gradient());
    for (int j : context().topology->at(t_)->graph.out_neighbors(rank())) {
        if (dead_.contains(j)) continue;
        Message m;
        m.kind = MessageKind::full_model;
        m.receiver = j;
        m.edge_seq = seq_[j]++;
        m.round = t_;
        m.elements = worker().size();
        if (math_) {
            const auto x = params();
            m.payload.assign(x.begin(), x.end());
        }
        send(out, std::move(m));
    }
    waiting_ = true;
    try_mix(out);
}

void ToyAverage::try_mix(Actions& out) {
    if (!waiting_) return;
    std::vector<const Message*> got;
    for (int j : context().topology->at(t_)->graph.in_neighbors(rank())) {
        if (dead_.contains(j)) continue;
        const auto it = in_.find({t_, j});
        if (it == in_.end()) return;  // still waiting
        got.push_back(&it->second);
    }
    if (math_) {
        const auto x = params();
        const float share = 1.0f / static_cast<float>(got.size() + 1);
        for (std::size_t i = 0; i < x.size(); ++i) {
            float sum = x[i];
            for (const auto* m : got) sum += m->payload[i];
            x[i] = sum * share;
        }
    }
    in_.erase(in_.begin(), in_.lower_bound({t_ + 1, -1}));
    waiting_ = false;
    ++t_;
    ++mutable_stats().rounds;
    next(out);
}

void ToyAverage::on_message(Time, Message msg, Actions& out) {
    // A failed neighbour's last messages may still come after this peer went on without it.
    if (dead_.contains(msg.sender)) return;
    if (msg.kind != MessageKind::full_model || msg.round < t_ ||
        (math_ && msg.payload.size() != worker().size()))
        throw Error(
            fmt::format("toy_average: rank {} got a bad message from rank {}", rank(), msg.sender));
    in_.emplace(std::make_pair(msg.round, msg.sender), std::move(msg));
    try_mix(out);
}

void ToyAverage::on_peer_failed(Time, int rank, Actions& out) {
    dead_.insert(rank);
    try_mix(out);
}

}  // namespace toy
