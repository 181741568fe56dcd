#include "gossamer/optimizers/protocols/sgp/sgp.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "gossamer/core/error.hpp"

namespace gossamer::proto {
namespace {

constexpr double kTolerance = 1e-9;
// Rounds of a schedule with no period checked up front; later ones are checked as they are used.
constexpr std::int64_t kCheckedRounds = 64;

// Once per schedule, not once per peer: n peers of a simulated job share the schedule, and each
// check reads every column (O(n) per peer, O(n^2) per job before: 40 s of a 16,384-peer start).
void check_columns(const topology::Schedule& s) {
    if (s.kind() == topology::WeightKind::push_sum) return;
    const std::string wrong = s.check_once("sgp: column-stochastic", [&s]() -> std::string {
        const std::int64_t rounds =
            std::min(s.period().value_or(kCheckedRounds), std::int64_t{4096});
        for (std::int64_t t = 0; t < rounds; ++t)
            if (!s.at(t)->weights.column_stochastic(kTolerance))
                return fmt::format(
                    "sgp needs column-stochastic weights (each sender splits its whole mass) but "
                    "the averaging weights of {} in round {} are not; use push_sum weights",
                    s.describe(), t);
        return {};
    });
    if (!wrong.empty()) throw TopologyError(wrong);
}

}  // namespace

SgpOptions parse_sgp_options(const json::Node* options) {
    SgpOptions o;
    if (!options) return o;
    options->expect_object({"staleness", "outbox", "chunk_bytes"});
    if (auto tau = options->find("staleness")) o.staleness = tau->as_int(0, 1000);
    if (auto box = options->find("outbox")) o.outbox = box->as_bool();
    if (auto chunk = options->find("chunk_bytes")) o.chunk_bytes = parse_chunk_bytes(*chunk);
    return o;
}

Sgp::Sgp(PeerContext ctx, SgpOptions options)
    : Protocol(std::move(ctx)),
      options_(options),
      math_(worker()),
      assembler_(worker().size(), worker().math()) {
    const auto& topo = context().topology;
    if (!topo) throw Error("sgp needs a topology");
    if (topo->n() != n())
        throw Error(fmt::format("the topology has {} peers but the job has {}", topo->n(), n()));
    if (options_.staleness < 0) throw Error("sgp: staleness must be >= 0");
    check_columns(*topo);
    check_share_chunks(options_.chunk_bytes, worker().size());
}

double Sgp::held_mass() const {
    double held = w_ + buf_w_ + outbox_.pending_weight();
    for (const Message& m : held_) held += m.weight;
    return held;
}

void Sgp::current_model(std::span<float> out) const {
    if (math_.on()) math_.debias_to_host(context().worker->params(), w_, out);
}

void Sgp::on_start(Time, Actions& out) {
    cut_at_ = resumed_at();
    next(out);
}

void Sgp::on_step_finished(Time, double, Actions& out) {
    stage_ = Stage::idle;
    // The optimizer steps x, not z (Assran et al.): in z's terms the step is scaled by 1 / w.
    worker().apply_gradient(params(), worker().gradient());
    push_shares(out);
    ++t_;
    ++mutable_stats().rounds;
    absorb_buffer();
    advance_frontier();
    next(out);
}

void Sgp::push_shares(Actions& out) {
    const auto round = context().topology->at(t_);
    const int i = rank();
    const auto receivers = round->graph.out_neighbors(i);
    // Column i of W is how this peer splits its mass; it must sum to 1 or mass leaks.
    double column = round->weights.at(i, i);
    for (int j : receivers) column += round->weights.at(j, i);
    if (std::abs(column - 1.0) > kTolerance)
        throw TopologyError(
            fmt::format("sgp: peer {} would split {} of its mass in round {}; the weights must be "
                        "column-stochastic",
                        i, column, t_));
    double self = round->weights.at(i, i);
    const std::span<float> x = params();
    for (int j : receivers) {
        const double share = round->weights.at(j, i);
        if (dead(j)) {
            self += share;  // kept, so that the survivors' mass is conserved
            continue;
        }
        Message m;
        m.kind = MessageKind::mass_share;
        m.receiver = j;
        m.edge_seq = next_seq_[j]++;
        m.round = t_;
        m.weight = share * w_;
        m.elements = worker().size();
        if (math_.on()) m.payload = math_.share(x, share);
        post(out, std::move(m));
    }
    w_ *= self;
    if (math_.on()) math_.keep(x, self);
}

void Sgp::post(Actions& out, Message m) {
    const std::uint64_t bytes =
        chunk_bytes_for(options_.chunk_bytes, context().cluster.get(), rank(), m.receiver);
    post_share(out, std::move(m), bytes / 4, options_.outbox ? &outbox_ : nullptr,
               [&](Message c) { send(out, std::move(c)); });
}

void Sgp::on_send_completed(Time, std::uint64_t id, bool, Actions& out) {
    // The edge is free: what added up meanwhile leaves as one share. A failed send's mass is
    // lost with its receiver, as any share in flight to a failed peer.
    if (auto m = outbox_.completed(id)) post(out, std::move(*m));
    if (stage_ == Stage::blocked) next(out);  // a cut may wait for the outbox (sgp_state.cpp)
}

void Sgp::take_share(const Message& m) {
    // Never dropped: while a step runs the share waits in the buffer, otherwise it is added now.
    if (stage_ == Stage::stepping) {
        ++buffered_;
        buf_w_ += m.weight;
        if (math_.on()) math_.buffer(m.payload);
    } else {
        w_ += m.weight;
        if (math_.on()) math_.add(params(), m.payload);
    }
}

void Sgp::heard(int j, const Message& m) {
    std::int64_t from = m.round;
    if (options_.outbox) {
        // One share in flight per edge keeps the edge in order, and a share that waited in the
        // outbox carries every round of the edge since the previous one.
        const auto it = last_round_.find(j);
        const std::int64_t previous = it == last_round_.end() ? -1 : it->second;
        from = previous + 1;
        last_round_[j] = std::max(previous, m.round);
    }
    for (std::int64_t r = std::max(from, frontier_ + 1); r <= m.round; ++r) {
        if (r != m.round) {
            const auto ins = context().topology->at(r)->graph.in_neighbors(rank());
            if (!std::binary_search(ins.begin(), ins.end(), j)) continue;
        }
        const std::pair<std::int64_t, int> key{r, j};
        const auto at = std::lower_bound(heard_.begin(), heard_.end(), key);
        if (at == heard_.end() || *at != key) heard_.insert(at, key);
    }
}

void Sgp::absorb_buffer() {
    if (buffered_ == 0) return;
    w_ += buf_w_;
    buf_w_ = 0.0;
    buffered_ = 0;
    if (math_.on()) math_.absorb(params());
}

void Sgp::accept_share(const Message& msg) {
    const int j = msg.sender;
    take_share(msg);

    Seen& seen = seen_[j];
    InEdge& edge = in_edges_[j];
    const std::int64_t behind = std::max<std::int64_t>(0, t_ - 1 - msg.round);
    ++edge.shares;
    edge.staleness_sum += behind;
    edge.staleness_max = std::max(edge.staleness_max, behind);
    if (msg.round > seen.round) {
        const double wij = context().topology->at(msg.round)->weights.at(rank(), j);
        seen = {msg.round, wij > 0 ? msg.weight / wij : 0.0};
        edge.weight = wij;
    }
    heard(j, msg);
}

void Sgp::on_message(Time, Message msg, Actions& out) {
    const int j = msg.sender;
    if (msg.kind != MessageKind::mass_share)
        throw Error(fmt::format("sgp: unexpected {} message from peer {}",
                                transport::to_string(msg.kind), j));
    if (j < 0 || j >= n() || j == rank())
        throw Error(fmt::format("sgp: a share from invalid peer {}", j));
    if (!assembler_.whole(msg)) {
        // A chunk: kept until its share is complete, which then moves its mass at once.
        auto share = assembler_.add(std::move(msg));
        if (!share) return;
        msg = std::move(*share);
    }
    if (worker().math() && msg.payload.size() != worker().size())
        throw Error(fmt::format("sgp: a share from peer {} carries {} values, expected {}", j,
                                msg.payload.size(), worker().size()));
    if (hold_for_cut(msg)) return;  // sgp_state.cpp (whole shares: after assembly)
    accept_share(msg);
    if (stage_ == Stage::stepping) return;  // absorbed (and counted) at the step boundary
    advance_frontier();
    next(out);
}

bool Sgp::absorbed(std::int64_t r) const {
    const auto round = context().topology->at(r);
    for (int j : round->graph.in_neighbors(rank()))
        if (!dead(j) && !std::binary_search(heard_.begin(), heard_.end(), std::pair{r, j}))
            return false;
    return true;
}

void Sgp::advance_frontier() {
    // Only rounds this peer has sent itself count: later ones may not have begun elsewhere.
    const std::int64_t before = frontier_;
    while (frontier_ + 1 < t_ && absorbed(frontier_ + 1)) ++frontier_;
    if (frontier_ == before) return;
    // Drop the rounds now at or behind the frontier (the front of the sorted vector).
    const auto keep = std::upper_bound(heard_.begin(), heard_.end(),
                                       std::pair{frontier_, std::numeric_limits<int>::max()});
    heard_.erase(heard_.begin(), keep);
}

void Sgp::next(Actions& out) {
    if (stage_ == Stage::stepping || stage_ == Stage::done) return;
    const std::int64_t last = context().max_steps;
    if (t_ >= last) {
        if (frontier_ >= last - 1) {
            stage_ = Stage::done;
            out.done = true;
        } else {
            stage_ = Stage::blocked;
        }
        return;
    }
    if (t_ - 1 - frontier_ > options_.staleness || !try_cut()) {
        stage_ = Stage::blocked;
        return;
    }
    if (math_.on()) math_.debias(params(), w_);
    stage_ = Stage::stepping;
    out.start_step = true;
}

void Sgp::on_peer_failed(Time, int j, Actions& out) {
    if (j == rank() || j < 0 || j >= n() || dead(j)) return;
    dead_.insert(std::upper_bound(dead_.begin(), dead_.end(), j), j);
    if (auto it = seen_.find(j); it != seen_.end()) mutable_stats().mass_lost += it->second.mass;
    // A share still waiting for the edge to j never left: its mass comes back here.
    if (auto m = outbox_.take(j)) take_share(*m);
    if (stage_ == Stage::stepping) return;
    advance_frontier();
    next(out);
}

json::Json Sgp::edge_metrics() const {
    json::Json out = json::Json::array();
    for (const auto& [j, e] : in_edges_)
        out.push_back({{"peer", j},
                       {"weight", e.weight},
                       {"staleness_mean", e.shares > 0 ? static_cast<double>(e.staleness_sum) /
                                                             static_cast<double>(e.shares)
                                                       : 0.0},
                       {"staleness_max", e.staleness_max},
                       {"shares", e.shares}});
    return out;
}

std::unique_ptr<Protocol> make_sgp(const json::Node* options, PeerContext ctx) {
    return std::make_unique<Sgp>(std::move(ctx), parse_sgp_options(options));
}

}  // namespace gossamer::proto
