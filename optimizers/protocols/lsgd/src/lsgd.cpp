// Decentralized leader pull (lsgd.hpp).
#include "gossamer/optimizers/protocols/lsgd/lsgd.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "gossamer/core/error.hpp"

namespace gossamer::proto {

LsgdOptions parse_lsgd_options(const json::Node* options) {
    LsgdOptions o;
    if (!options) return o;
    options->expect_object({"pull", "period", "smoothing"});
    if (auto p = options->find("pull")) {
        o.pull = p->as_double();
        if (!(o.pull > 0) || o.pull > 1)
            p->fail(fmt::format("pull {} must be in (0, 1]", o.pull), "use e.g. 0.2");
    }
    if (auto p = options->find("period")) o.period = static_cast<int>(p->as_int(1, 1'000'000));
    if (auto b = options->find("smoothing")) {
        o.smoothing = b->as_double();
        if (!(o.smoothing >= 0) || !(o.smoothing < 1))
            b->fail(fmt::format("smoothing {} must be in [0, 1)", o.smoothing), "use e.g. 0.9");
    }
    return o;
}

Lsgd::Lsgd(PeerContext ctx, LsgdOptions options)
    : Protocol(std::move(ctx)), options_(options), math_(worker().math()) {
    if (!(options_.pull > 0) || options_.pull > 1)
        throw ConfigError("", "pull", fmt::format("{} is not in (0, 1]", options_.pull),
                          "use e.g. 0.2");
    if (options_.period < 1)
        throw ConfigError("", "period", fmt::format("{} is below 1", options_.period), "use 1");
    if (!(options_.smoothing >= 0) || !(options_.smoothing < 1))
        throw ConfigError("", "smoothing", fmt::format("{} is not in [0, 1)", options_.smoothing),
                          "use e.g. 0.9");
    if (worker().device())
        throw ConfigError("", "algorithm", "lsgd keeps its vectors in host memory",
                          "run lsgd with parameters on the host");
    const auto& topo = context().topology;
    if (!topo) throw Error("lsgd needs a topology");
    if (topo->n() != n())
        throw Error(fmt::format("the topology has {} peers but the job has {}", topo->n(), n()));
}

void Lsgd::on_start(Time, Actions& out) {
    next(out);
}

void Lsgd::next(Actions& out) {
    if (t_ >= context().max_steps)
        out.done = true;
    else
        out.start_step = true;
}

void Lsgd::on_step_finished(Time, double loss, Actions& out) {
    worker().apply_gradient(math_ ? params() : std::span<float>{}, worker().gradient());
    loss_ = have_loss_ ? options_.smoothing * loss_ + (1 - options_.smoothing) * loss : loss;
    have_loss_ = true;
    if (!communicates(t_)) {
        ++t_;
        return next(out);
    }
    const auto round = context().topology->at(t_);
    for (int j : round->graph.out_neighbors(rank())) {
        if (dead_.contains(j)) continue;
        Message m;
        m.kind = MessageKind::full_model;
        m.receiver = j;
        m.edge_seq = seq_[j]++;
        m.round = t_;
        m.weight = loss_;
        m.elements = worker().size();
        if (math_) {
            const auto x = params();
            m.payload.assign(x.begin(), x.end());
        }
        send(out, std::move(m));
    }
    waiting_ = true;
    try_pull(out);
}

void Lsgd::try_pull(Actions& out) {
    if (!waiting_) return;
    const auto round = context().topology->at(t_);
    int best = rank();
    double best_loss = loss_;
    for (int j : round->graph.in_neighbors(rank())) {
        if (dead_.contains(j)) continue;
        const auto it = in_.find({t_, j});
        if (it == in_.end()) return;  // still waiting
        // Ascending ranks: a tie keeps the lower rank (this peer's own when it is lower).
        if (it->second.weight < best_loss || (it->second.weight == best_loss && j < best)) {
            best = j;
            best_loss = it->second.weight;
        }
    }
    if (best != rank()) {
        ++pulls_;
        if (math_) {
            const auto x = params();
            const auto& lead = in_.at({t_, best}).payload;
            const auto l = static_cast<float>(options_.pull);
            for (std::size_t i = 0; i < x.size(); ++i) x[i] -= l * (x[i] - lead[i]);
        }
    }
    leader_ = best;
    in_.erase(in_.begin(), in_.lower_bound({t_ + 1, -1}));
    waiting_ = false;
    ++t_;
    ++mutable_stats().rounds;
    next(out);
}

void Lsgd::on_message(Time, Message msg, Actions& out) {
    const auto bad = [&](const std::string& what) {
        throw Error(fmt::format("lsgd: rank {} got a bad message from rank {} (round {}): {}",
                                rank(), msg.sender, msg.round, what));
    };
    if (msg.kind != MessageKind::full_model) bad("kind is not full_model");
    if (msg.sender < 0 || msg.sender >= n() || msg.sender == rank()) bad("invalid sender");
    if (dead_.contains(msg.sender)) return;  // sent before it failed: no longer followed
    if (msg.round < t_ || !communicates(msg.round)) bad("not a round this peer awaits");
    if (!context().topology->at(msg.round)->graph.has_edge(msg.sender, rank()))
        bad("not an in-neighbour of that round");
    if (math_ && msg.payload.size() != worker().size())
        bad(fmt::format("{} values, expected {}", msg.payload.size(), worker().size()));
    const auto key = std::make_pair(msg.round, msg.sender);
    if (!in_.emplace(key, std::move(msg)).second) bad("received twice");
    if (!done()) try_pull(out);
}

void Lsgd::on_peer_failed(Time, int dead, Actions& out) {
    if (dead == rank() || dead < 0 || dead >= n()) return;
    dead_.insert(dead);
    for (auto it = in_.begin(); it != in_.end();)
        it = it->first.second == dead ? in_.erase(it) : std::next(it);
    if (!done()) try_pull(out);
}

std::unique_ptr<Protocol> make_lsgd(const json::Node* options, PeerContext ctx) {
    return std::make_unique<Lsgd>(std::move(ctx), parse_lsgd_options(options));
}

}  // namespace gossamer::proto
