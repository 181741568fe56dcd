// GADMM on a chain: heads and tails update alternately, then the duals (gadmm.hpp).
#include "gossamer/optimizers/protocols/gadmm/gadmm.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "gossamer/core/error.hpp"

namespace gossamer::proto {

GadmmOptions parse_gadmm_options(const json::Node* options) {
    GadmmOptions o;
    if (!options) return o;
    options->expect_object({"rho", "local_steps"});
    if (auto r = options->find("rho")) {
        o.rho = r->as_double();
        if (!(o.rho > 0)) r->fail(fmt::format("rho {} must be > 0", o.rho), "use e.g. 0.5");
    }
    if (auto j = options->find("local_steps"))
        o.local_steps = static_cast<int>(j->as_int(1, 10000));
    return o;
}

Gadmm::Gadmm(PeerContext ctx, GadmmOptions options)
    : Protocol(std::move(ctx)), options_(options), math_(worker().math()) {
    if (!(options_.rho > 0))
        throw ConfigError("", "rho", fmt::format("{} must be > 0", options_.rho), "use e.g. 0.5");
    if (options_.local_steps < 1)
        throw ConfigError("", "local_steps", fmt::format("{} is below 1", options_.local_steps),
                          "use e.g. 5");
    if (worker().device())
        throw ConfigError("", "algorithm", "gadmm keeps its vectors in host memory",
                          "run gadmm with parameters on the host");
    const auto& topo = context().topology;
    if (!topo) throw Error("gadmm needs a topology");
    if (topo->n() != n())
        throw Error(fmt::format("the topology has {} peers but the job has {}", topo->n(), n()));
    // The whole chain, once per schedule (n simulated peers share it; O(n) each before).
    const std::string wrong = topo->check_once("gadmm: chain", [&topo]() -> std::string {
        const auto& g = topo->at(0)->graph;
        for (int i = 0; i + 1 < topo->n(); ++i)
            if (!g.has_edge(i, i + 1) || !g.has_edge(i + 1, i))
                return fmt::format(
                    "gadmm needs a chain in rank order (every rank i linked with i + 1 both ways) "
                    "but {} does not link {} and {}; use a ring or a path topology",
                    topo->describe(), i, i + 1);
        return {};
    });
    if (!wrong.empty()) throw TopologyError(wrong);
    const std::size_t m = math_ ? worker().size() : 0;
    side_[0].peer = rank() > 0 ? rank() - 1 : -1;
    side_[1].peer = rank() + 1 < n() ? rank() + 1 : -1;
    for (Side& s : side_)
        if (s.peer >= 0) s.lambda.assign(m, 0.0f);
    g_.resize(m);
}

void Gadmm::on_start(Time, Actions& out) {
    // Every peer starts from the job's seed, so theta_q^0 is this peer's own x.
    if (math_) {
        const auto x = params();
        for (Side& s : side_)
            if (s.peer >= 0) s.theta.assign(x.begin(), x.end());
    }
    for (Side& s : side_) s.have = 0;
    if (context().max_steps <= 0) {
        stage_ = Stage::done;
        out.done = true;
        return;
    }
    advance(out);
}

void Gadmm::on_step_finished(Time, double, Actions& out) {
    if (stage_ != Stage::stepping) return;  // a failure ended this peer meanwhile
    if (math_) {
        // The gradient of the augmented Lagrangian in theta_p: f_p's, then the penalties'.
        const auto x = params();
        const auto grad = worker().gradient();
        const auto rho = static_cast<float>(options_.rho);
        std::copy(grad.begin(), grad.end(), g_.begin());
        for (int side = 0; side < 2; ++side) {
            const Side& s = side_[side];
            if (s.peer < 0 || s.failed) continue;
            const float sign = side == 0 ? -1.0f : 1.0f;  // p is the edge's right (0) or left end
            for (std::size_t i = 0; i < g_.size(); ++i)
                g_[i] += sign * s.lambda[i] + rho * (x[i] - s.theta[i]);
        }
        worker().apply_gradient(x, g_);
    } else {
        worker().apply_gradient({}, {});
    }
    ++inner_;
    ++steps_;
    if (inner_ < options_.local_steps && steps_ < context().max_steps) {
        out.start_step = true;
        return;
    }
    send_theta(out);
    stage_ = Stage::wait_dual;
    advance(out);
}

void Gadmm::send_theta(Actions& out) {
    const bool last = steps_ >= context().max_steps;
    for (Side& s : side_) {
        if (s.peer < 0 || s.failed) continue;
        Message m;
        m.kind = MessageKind::full_model;
        m.receiver = s.peer;
        m.edge_seq = s.seq++;
        m.round = k_;
        m.chunk = last ? 1 : 0;
        m.elements = worker().size();
        if (math_) {
            const auto x = params();
            m.payload.assign(x.begin(), x.end());
        }
        send(out, std::move(m));
    }
}

void Gadmm::take(std::int64_t iteration) {
    for (Side& s : side_) {
        while (s.have < iteration && !s.early.empty() && s.early.begin()->first == s.have) {
            Message& m = s.early.begin()->second;
            if (math_) s.theta = std::move(m.payload);
            s.have = m.round + 1;
            if (m.chunk == 1) s.last = s.have;
            s.early.erase(s.early.begin());
        }
    }
}

bool Gadmm::ready(std::int64_t iteration) const {
    for (const Side& s : side_)
        if (s.peer >= 0 && !s.failed && s.have < iteration && s.last != s.have) return false;
    return true;
}

void Gadmm::update_duals() {
    if (!math_) return;
    const auto x = params();
    const auto rho = static_cast<float>(options_.rho);
    for (int side = 0; side < 2; ++side) {
        Side& s = side_[side];
        // Only an edge whose other end took this iteration too: both ends add the same floats.
        if (s.peer < 0 || s.failed || s.have != k_ + 1) continue;
        for (std::size_t i = 0; i < x.size(); ++i) {
            const float d = side == 0 ? s.theta[i] - x[i] : x[i] - s.theta[i];
            s.lambda[i] += rho * d;
        }
    }
}

void Gadmm::advance(Actions& out) {
    for (;;) {
        if (stage_ == Stage::wait_primal) {
            // Heads use the tails' theta^k, tails the heads' fresh theta^{k+1}.
            const std::int64_t need = head() ? k_ : k_ + 1;
            take(need);
            if (!ready(need)) return;
            stage_ = Stage::stepping;
            inner_ = 0;
            out.start_step = true;
            return;
        }
        if (stage_ != Stage::wait_dual) return;
        take(k_ + 1);
        if (!ready(k_ + 1)) return;
        update_duals();
        ++k_;
        ++mutable_stats().rounds;
        if (steps_ >= context().max_steps) {
            stage_ = Stage::done;
            out.done = true;
            return;
        }
        stage_ = Stage::wait_primal;
    }
}

void Gadmm::on_message(Time, Message msg, Actions& out) {
    if (stage_ == Stage::done) return;
    const auto bad = [&](const std::string& what) {
        throw Error(fmt::format("gadmm: rank {} got a bad message from rank {} (round {}): {}",
                                rank(), msg.sender, msg.round, what));
    };
    if (msg.kind != MessageKind::full_model) bad("kind is not full_model");
    const int side = msg.sender == side_[0].peer && msg.sender >= 0   ? 0
                     : msg.sender == side_[1].peer && msg.sender >= 0 ? 1
                                                                      : -1;
    if (side < 0) bad("not a chain neighbour");
    Side& s = side_[side];
    if (s.failed) return;
    if (math_ && msg.payload.size() != worker().size())
        bad(fmt::format("{} values, expected {}", msg.payload.size(), worker().size()));
    if (msg.round < s.have || !s.early.emplace(msg.round, std::move(msg)).second)
        bad("received twice");
    advance(out);
}

void Gadmm::on_peer_failed(Time, int dead, Actions& out) {
    for (Side& s : side_)
        if (s.peer == dead && dead >= 0) {
            s.failed = true;
            s.early.clear();
        }
    if (stage_ == Stage::wait_primal || stage_ == Stage::wait_dual) advance(out);
}

std::unique_ptr<Protocol> make_gadmm(const json::Node* options, PeerContext ctx) {
    return std::make_unique<Gadmm>(std::move(ctx), parse_gadmm_options(options));
}

}  // namespace gossamer::proto
