#include "gossamer/optimizers/protocols/async/async_gossip.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "async_control.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocols/async/straggler.hpp"

namespace gossamer::proto {
namespace {

constexpr std::uint32_t kControlFinished = async_control::kFinished;
constexpr std::uint32_t kControlRate = async_control::kRate;
// Own step boundaries kept (for the own rate and for staleness; older shares count as this many
// steps stale); at least rate_window + 1 (rate_window <= 4096).
constexpr std::size_t kHistory = 4097;

}  // namespace

AsyncGossip::AsyncGossip(PeerContext ctx, AsyncOptions options)
    : Protocol(std::move(ctx)),
      options_(std::move(options)),
      rng_(options_.seed * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(rank())),
      self_share_(options_.self_base()),
      effective_self_(options_.self_base()),
      math_(worker()),
      assembler_(worker().size(), worker().math()) {
    const auto& topo = context().topology;
    if (!topo) throw Error("async needs a topology");
    if (topo->n() != n())
        throw Error(fmt::format("the topology has {} peers but the job has {}", topo->n(), n()));
    // Per-neighbour counters are 32-bit (async_gossip.hpp, Neighbour).
    if (context().max_steps > std::numeric_limits<std::int32_t>::max())
        throw Error(fmt::format("async takes at most {} steps, not {}",
                                std::numeric_limits<std::int32_t>::max(), context().max_steps));
    history_.set_capacity(kHistory + 1);
    // A schedule with no period may name round out-neighbours beyond the base graph (its first
    // 64 rounds): every neighbour's messages are then kept for the silence rule.
    heard_all_ = !topo->period().has_value();
    // One base graph for every peer of the job (shared by the schedule): nothing here is O(n).
    const topology::Digraph& base = topo->base_graph();
    base_ = &base;
    // Exactly the union of in- and out-neighbours: vector growth would leave up to half of the
    // largest per-peer allocation unused (docs/modules/simulator.md, "Scale").
    const auto outs = base.out_neighbors(rank()), ins = base.in_neighbors(rank());
    std::size_t both = 0;
    for (int j : ins) both += std::binary_search(outs.begin(), outs.end(), j);
    nbrs_.reserve(outs.size() + ins.size() - both);
    for (int j : base.out_neighbors(rank())) neighbour(j).out = true;
    for (int j : base.in_neighbors(rank())) neighbour(j).in = true;
    collect_live_out();
    check_share_chunks(options_.chunk_bytes, worker().size());
}

AsyncGossip::Neighbour& AsyncGossip::neighbour(int j) {
    // Inserting moves the others (one sorted vector): callers hold one reference at a time.
    if (auto it = nbrs_.find(j); it != nbrs_.end()) return it->second;
    Neighbour& nb = nbrs_[j];
    nb.peer = j;
    const auto window = static_cast<std::size_t>(options_.rate_window);
    nb.arrivals.set_capacity(window + 1);
    nb.heard.set_capacity(window + 1);
    return nb;
}

bool AsyncGossip::silent(const Neighbour& nb) const {
    // Judged only once its window is full: a few early gaps say little about its cadence (and a
    // neighbour never heard from keeps its shares).
    if (options_.silence <= 0 || nb.heard.size() < nb.heard.capacity()) return false;
    // The threshold is at least `silence`: most calls (every candidate, every step) end here.
    if (now_ - nb.heard.back() <= options_.silence) return false;
    double gap = 0;
    for (std::size_t i = 1; i < nb.heard.size(); ++i)
        gap = std::max(gap, nb.heard[i] - nb.heard[i - 1]);
    return now_ - nb.heard.back() > std::max(options_.silence, options_.silence_factor * gap);
}

void AsyncGossip::current_model(std::span<float> out) const {
    if (math_.on()) math_.debias_to_host(context().worker->params(), w_, out);
}

double AsyncGossip::own_rate() const {
    // The last rate_window steps of the boundary history.
    const std::size_t k =
        std::min(history_.size(), static_cast<std::size_t>(options_.rate_window) + 1);
    if (k < 2) return 0;
    const double span = history_.back() - history_[history_.size() - k];
    return span > 0 ? static_cast<double>(k - 1) / span : 0;
}

double AsyncGossip::neighbour_rate() const {
    double sum = 0;
    int count = 0;
    for (const auto& [j, nb] : nbrs_)
        if (usable(nb) && nb.rate > 0) {
            sum += nb.rate;
            ++count;
        }
    return count ? sum / count : 0;
}

double AsyncGossip::outflow() const {
    return own_rate() * (1.0 - advertised_self());
}

double AsyncGossip::push_fraction(int peer) const {
    const int k = std::min<int>(options_.targets, static_cast<int>(live_out().size()));
    return fraction_to(known(peer), k);
}

double AsyncGossip::fraction_to(const Neighbour& e, int k) const {
    if (k == 0) return 0.0;
    const double base = (1.0 - self_share_) / k;
    if (!options_.straggler_aware || !options_.balance) return base;
    const double mine = outflow();
    const double theirs = e.rate * (1.0 - e.reported_self);
    // Unknown on either side (no rate yet, no report yet): neutral.
    if (!(mine > 0) || !(theirs > 0) || e.reports == 0) return base;
    return base * std::min(1.0, theirs / mine);
}

std::vector<int> AsyncGossip::live_out() const {
    return live_;
}

void AsyncGossip::collect_live_out() {
    live_.clear();
    for (const auto& [j, nb] : nbrs_)
        if (nb.out && usable(nb)) live_.push_back(j);
}

std::int64_t AsyncGossip::edge_bound() const {
    // From the base out-degree: with fewer live edges the same force age serves them sooner.
    return effective_edge_bound(options_.edge_bound, base_->out_degree(rank()), options_.targets);
}

std::int64_t AsyncGossip::report_period() const {
    // An in-neighbour pushes here about once per ceil(in-degree / targets) of its steps (one
    // edge among as many, k at a time): reporting more often than it can use a report only adds
    // messages, about in-degree / report_every per step (docs/algorithms/async.md, "Rate reports").
    const int in = base_->in_degree(rank());
    const std::int64_t uses = (in + options_.targets - 1) / options_.targets;
    return std::max<std::int64_t>(options_.report_every, uses);
}

int AsyncGossip::late_neighbours() const {
    int late = 0;
    for (const auto& [j, nb] : nbrs_) late += usable(nb) && nb.late_now;
    return late;
}

void AsyncGossip::on_start(Time now, Actions& out) {
    now_ = now;
    history_.push_back(now);
    if (context().max_steps <= 0) return finish(out);
    if (math_.on() && resumed_at() > 0)
        math_.debias(params(), w_);  // (x, w) of a checkpoint
    else if (math_.on())
        math_.set_z(worker().params());
    out.start_step = true;
}

void AsyncGossip::on_step_finished(Time now, double, Actions& out) {
    now_ = now;
    history_.push_back(now);
    while (history_.size() > kHistory) history_.pop_front();
    // Shares that came during the step join first: the step then moves a full unit of mass on
    // average (right after a split w is only s of it), and fresh mass is forwarded at once.
    absorb_buffer();
    for (Message& m : std::exchange(late_answers_, {})) on_admitted(now, m, out);  // elastic
    apply_step();
    serve_sponsored(out);                   // async_elastic.cpp
    if (leave_due_) return hand_over(out);  // the step's push is the whole state
    push_shares(out);
    ++t_;
    ++mutable_stats().rounds;
    if (t_ >= context().max_steps) return finish(out);
    if (options_.straggler_aware) send_reports(now, out);
    if (checkpoint_due(t_)) return begin_quiesce(out);  // async_state.cpp
    if (math_.on()) math_.debias(params(), w_);
    out.start_step = true;  // wait-free: the next step starts right away
}

void AsyncGossip::apply_step() {
    if (options_.step == AsyncStep::numerator || !worker().math()) {
        // As sgp: x -= lr g, a step of lr / w in z's terms.
        worker().apply_gradient(params(), worker().gradient());
        return;
    }
    // The optimizer steps the de-biased model z = x / w (after the absorbed shares), then
    // x = w z. See docs/algorithms/async.md, "Which variable the optimizer steps".
    const auto x = params();
    math_.debias(x, w_);
    worker().apply_gradient(math_.z(), worker().gradient());
    math_.rescale(x, w_);
}

namespace {
// push_shares' working vectors: one set per thread (a protocol handles one event at a time, and
// a simulated job runs many peers on one thread), so a step allocates nothing and a peer keeps
// no copy of them.
struct PushScratch {
    std::vector<int> outs, chosen;
    std::vector<EdgeCandidate> cands, pool;
    std::vector<std::pair<int, double>> preferred;
};
thread_local PushScratch push_scratch;
// x^p, without the call for the default p = 1 (pow(x, 1) is x exactly: its error is below one
// unit in the last place); every step weighs every candidate with it.
double power(double x, double p) {
    return p == 1.0 ? x : std::pow(x, p);
}
// on_message's copy of a neighbour's gap window for the deadline quantile (one per thread, as
// push_scratch).
thread_local std::vector<double> deadline_scratch;
}  // namespace

void AsyncGossip::push_shares(Actions& out) {
    PushScratch& sc = push_scratch;
    auto& cands = sc.cands;
    auto& outs = sc.outs;
    auto& preferred = sc.preferred;
    const int degree = static_cast<int>(live_.size());
    int k = std::min(options_.targets, degree);
    const double r_self = own_rate();
    self_share_ = options_.self_base();
    if (options_.straggler_aware)
        self_share_ = straggler_self_share(self_share_, options_.beta, r_self, neighbour_rate());
    if (k == 0) {
        self_share_ = 1.0;  // nobody left to push to: the mass stays here
        return;
    }
    cands.clear();
    for (int j : live_) {
        const Neighbour& e = nbrs_.at(j);
        if (silent(e)) continue;
        double weight = 1.0;
        if (options_.straggler_aware) {
            // An unmeasured target counts as fast as this peer (neutral).
            const double r = e.rate > 0 ? e.rate : (r_self > 0 ? r_self : 1.0);
            weight = power(r, options_.target_power);
        }
        weight *= link_weight(j, r_self);
        cands.push_back({j, e.last_push, std::max(weight, 1e-300)});
    }
    const int base_degree = base_->out_degree(rank());
    const std::int64_t force = edge_force_age(edge_bound(), base_degree, options_.targets);
    // Link-aware: busy edges wait unless forced; with none free this step pushes nothing.
    if (options_.link_aware && (k = keep_free_edges(cands, k, force)) == 0) {
        self_share_ = 1.0;
        return note_kept(1.0);
    }
    preferred.clear();
    if (options_.follow_schedule) {
        // Round t's out-neighbours, rotated by t k: a round with more of them than k slots (a
        // static graph) is served round robin.
        const auto round = context().topology->at(t_);
        const auto round_outs = round->graph.out_neighbors(rank());
        outs.assign(round_outs.begin(), round_outs.end());
        if (!outs.empty())
            std::rotate(outs.begin(),
                        outs.begin() + static_cast<std::ptrdiff_t>(
                                           (t_ * k) % static_cast<std::int64_t>(outs.size())),
                        outs.end());
        for (int j : outs) {
            auto it = nbrs_.find(j);
            if (it == nbrs_.end() || !usable(it->second) || silent(it->second)) continue;
            double accept = 1.0;
            const double r = it->second.rate;
            if (options_.straggler_aware && r > 0 && r_self > 0 && r < r_self)
                accept = power(r / r_self, options_.target_power);
            accept *= link_weight(j, r_self);
            preferred.emplace_back(j, accept);
        }
    }
    pick_targets_into(cands, preferred, k, t_, force, rng_, sc.pool, sc.chosen);
    const std::span<float> x = params();
    double kept = 1.0;
    for (int j : sc.chosen) {
        Neighbour& e = nbrs_.at(j);
        const double fraction = fraction_to(e, k);
        kept -= fraction;
        Message m;
        m.kind = MessageKind::mass_share;
        m.receiver = j;
        m.round = t_;
        m.weight = fraction * w_;
        m.sent_at = now_;
        m.elements = worker().size();
        m.edge_seq = static_cast<std::uint64_t>(e.pushes);
        ++e.pushes;
        e.last_push = static_cast<std::int32_t>(t_);
        e.last_fraction = fraction;
        e.weight_sent += m.weight;
        if (math_.on()) m.payload = math_.share(x, fraction);
        post(out, std::move(m));
    }
    w_ *= kept;
    note_kept(kept);
    if (math_.on()) math_.keep(x, kept);
}

void AsyncGossip::post(Actions& out, Message m) {
    const std::uint64_t bytes =
        chunk_bytes_for(options_.chunk_bytes, context().cluster.get(), rank(), m.receiver);
    post_share(out, std::move(m), bytes / 4, options_.outbox ? &outbox_ : nullptr,
               [&](Message c) { send(out, std::move(c)); });
}

void AsyncGossip::on_send_completed(Time now, std::uint64_t id, bool, Actions& out) {
    // The edge is free: what added up meanwhile leaves as one share (also after done: the
    // driver runs until nothing is unsent).
    if (auto m = outbox_.completed(id)) post(out, std::move(*m));
    if (!asks_.empty() && !stepping()) serve_sponsored(out);  // a sponsor's edge was busy
    if (quiescing_) check_quiesced(now, out);                 // async_state.cpp
}

void AsyncGossip::take_mass(int from, const Message& m) {
    // Never dropped: while a step runs the share waits in the buffer, otherwise it is added now.
    if (stepping()) {
        pending_.emplace_back(from, m.sent_at);
        buf_w_ += m.weight;
        if (math_.on()) math_.buffer(m.payload);
    } else {
        absorb(from, m.sent_at);
        w_ += m.weight;
        if (math_.on()) math_.add(params(), m.payload);
    }
}

void AsyncGossip::send_reports(Time now, Actions& out) {
    // Out-neighbours on a directed graph never hear from this peer otherwise; they need its
    // rate and self share to size the shares they push here (docs/algorithms/async.md).
    const std::int64_t period = report_period();
    const auto report = [&](int j) {
        Message m;
        m.kind = MessageKind::control;
        m.chunk = kControlRate;
        m.receiver = j;
        m.round = t_;
        m.sent_at = now;
        m.payload = {static_cast<float>(own_rate()), static_cast<float>(advertised_self())};
        m.elements = m.payload.size();
        send(out, std::move(m));
    };
    if (period == options_.report_every) {
        // Every in-neighbour at once, after the first step and every period steps.
        if (t_ != 1 && t_ % period != 0) return;
        for (const auto& [j, nb] : nbrs_)
            if (nb.in && usable(nb)) report(j);
        return;
    }
    // The period raised to ceil(in-degree / targets): in-neighbour number i (ascending rank)
    // hears at the steps t = i mod period, so each still hears every period steps but a step
    // sends about `targets` reports, never a burst to every in-neighbour at once (n times the
    // in-degree messages in flight after the first step of a homogeneous job).
    const auto ins = base_->in_neighbors(rank());
    for (auto i = static_cast<std::size_t>(t_ % period); i < ins.size();
         i += static_cast<std::size_t>(period)) {
        auto it = nbrs_.find(ins[i]);
        if (it != nbrs_.end() && usable(it->second)) report(ins[i]);
    }
}

void AsyncGossip::on_report(const Message& msg, Neighbour& nb) {
    if (msg.payload.size() != 2 || !(msg.payload[0] >= 0) || !(msg.payload[1] >= 0) ||
        !(msg.payload[1] <= 1))
        throw Error(fmt::format("async: a malformed rate report from peer {}", nb.peer));
    ++nb.reports;
    const double rate = msg.payload[0];
    nb.reported_self = msg.payload[1];
    if (rate > 0) nb.rate = rate;
}

void AsyncGossip::absorb(int from, Time sent_at) {
    // Staleness in this peer's own steps: step ends strictly between the share's sending and its
    // absorption. A share absorbed at the first step end after it was sent counts 0, however
    // slow its sender is.
    if (from == rank()) return;  // own mass back from the outbox (a failed receiver)
    Neighbour& nb = neighbour(from);
    // history_ is a ring (ascending times, oldest first): binary searches over its positions.
    const auto first = [&](std::size_t from, auto&& past) {
        std::size_t lo = from, hi = history_.size();
        while (lo < hi) {
            const std::size_t mid = lo + (hi - lo) / 2;
            if (past(history_[mid]))
                hi = mid;
            else
                lo = mid + 1;
        }
        return lo;
    };
    const std::size_t lo = first(0, [&](Time b) { return b > sent_at; });
    const std::size_t hi = first(lo, [&](Time b) { return b >= now_; });
    const auto stale = static_cast<std::int64_t>(hi - lo);
    ++nb.absorbed;
    nb.staleness_sum += stale;
    nb.staleness_max = std::max(nb.staleness_max, static_cast<std::int32_t>(stale));
    mutable_stats().staleness_max = std::max(mutable_stats().staleness_max, stale);
}

void AsyncGossip::absorb_buffer() {
    if (pending_.empty()) return;
    for (const auto& [from, sent_at] : pending_) absorb(from, sent_at);
    pending_.clear();
    w_ += buf_w_;
    buf_w_ = 0.0;
    if (math_.on()) math_.absorb(params());
}

void AsyncGossip::on_message(Time now, Message msg, Actions& out) {
    const int j = msg.sender;
    if (j < 0 || j >= n() || j == rank())
        throw Error(fmt::format("async: a message from invalid peer {}", j));
    Neighbour& nb = neighbour(j);
    // Held for a cut or not, it was heard (not silent). Messages closer together than
    // silence / silence_factor are one hearing (the latest of them): a slow edge delivers the
    // rate reports queued behind a share (the outbox's) in one burst, whose tiny gaps would
    // otherwise pass for the neighbour's cadence and call it silent just after each burst.
    // Only an out-neighbour can be judged silent (push_shares: the live out-neighbours, and a
    // periodic schedule's rounds are within the base graph), so only its window is kept.
    const double burst = options_.silence / options_.silence_factor;
    if (nb.out || heard_all_) {
        if (nb.heard.size() >= 2 && now - nb.heard[nb.heard.size() - 2] < burst)
            nb.heard[nb.heard.size() - 1] = now;
        else
            nb.heard.push_back(now);
    }
    if (on_membership(now, msg, nb, out)) return;                 // async_elastic.cpp
    if (quiesce_intercept(msg)) return check_quiesced(now, out);  // async_state.cpp
    if (msg.kind == MessageKind::control) {
        if (msg.chunk == kControlRate) return on_report(msg, nb);
        nb.finished = true;  // its last step is done: push nothing more to it
        collect_live_out();
        nb.final_shares = async_control::count32(msg.edge_seq);
        return;
    }
    if (msg.kind != MessageKind::mass_share)
        throw Error(fmt::format("async: unexpected {} message from peer {}",
                                transport::to_string(msg.kind), j));
    if (!assembler_.whole(msg)) {
        // A chunk (chunk_bytes): its share counts, and moves mass, once every chunk is here.
        auto share = assembler_.add(std::move(msg));
        if (!share) return;
        msg = std::move(*share);
    }
    if (worker().math() && msg.payload.size() != worker().size())
        throw Error(fmt::format("async: a share from peer {} carries {} values, expected {}", j,
                                msg.payload.size(), worker().size()));
    // With the outbox a share may carry several of the sender's pushes: edge_seq numbers the
    // latest, and the edge stays in order (one in flight).
    // A share its previous incarnation sent before it rejoined moves mass but is not counted
    // against the new one's edge (docs/operations/elastic.md).
    if (msg.sent_at >= nb.entered_at) {
        if (options_.outbox)
            nb.shares = std::max(nb.shares, async_control::count32(msg.edge_seq + 1));
        else
            ++nb.shares;
    }
    nb.weight_received += msg.weight;
    nb.last_share = msg.weight;
    now_ = now;
    // Rate: the sender's steps over the arrival times of its shares, in a sliding window.
    // (The window keeps the last rate_window + 1 arrivals.)
    nb.arrivals.push_back({now, msg.round});
    std::int64_t lo = nb.arrivals.front().second, hi = lo;
    for (std::size_t i = 0; i < nb.arrivals.size(); ++i)
        lo = std::min(lo, nb.arrivals[i].second), hi = std::max(hi, nb.arrivals[i].second);
    const double span = nb.arrivals.back().first - nb.arrivals.front().first;
    if (span > 0 && hi > lo && nb.reports == 0) nb.rate = static_cast<double>(hi - lo) / span;
    nb.late_now = false;  // a late share is still absorbed; lateness was counted at its deadline
    if (leaving_) return pass_on(msg, out);  // async_elastic.cpp
    take_mass(j, msg);
    if (nb.arrivals.size() > 1) {
        // The inter-arrival times of the window (what a separate window of gaps would hold).
        auto& gaps = deadline_scratch;
        gaps.clear();
        for (std::size_t i = 1; i < nb.arrivals.size(); ++i)
            gaps.push_back(nb.arrivals[i].first - nb.arrivals[i - 1].first);
        nb.deadline =
            std::min(quantile_in_place(gaps, options_.deadline_percentile), options_.deadline_cap);
        if (!nb.armed) arm_deadline(now, nb, out);
    }
    if (quiescing_) check_quiesced(now, out);
}

void AsyncGossip::arm_deadline(Time now, Neighbour& nb, Actions& out) {
    if (done() || !usable(nb)) return;
    const Time due = nb.arrivals.back().first + nb.deadline;
    if (due < now) return;
    nb.armed = true;
    out.deadlines.push_back({due, static_cast<std::uint64_t>(nb.peer)});
}

void AsyncGossip::on_deadline(Time now, std::uint64_t id, Actions& out) {
    auto it = nbrs_.find(static_cast<int>(id));
    if (it == nbrs_.end()) return;
    Neighbour& nb = it->second;
    nb.armed = false;
    if (done() || !usable(nb) || nb.arrivals.empty()) return;
    const Time due = nb.arrivals.back().first + nb.deadline;
    if (due > now) return arm_deadline(now, nb, out);  // a share came since: the next is due
    if (!nb.late_now) {
        nb.late_now = true;  // counted; nobody waits for it
        ++nb.late;
    }
}

void AsyncGossip::finish(Actions& out) {
    // Tell every neighbour, so that none keeps pushing mass to a peer that never pushes back.
    for (const auto& [j, nb] : nbrs_) {
        if (nb.failed || nb.absent) continue;
        Message m;
        m.kind = MessageKind::control;
        m.chunk = kControlFinished;
        m.receiver = j;
        m.round = t_;
        m.edge_seq = static_cast<std::uint64_t>(nb.pushes);  // no more after these
        send(out, std::move(m));
    }
    out.done = true;
}

// Shares pushed here before the sender learnt this peer finished are still absorbed (on_message
// adds them to w and x when no step runs), so the final mass is exact.
bool AsyncGossip::awaits(const Neighbour& nb) {
    return nb.in && !nb.failed && !nb.absent && (!nb.finished || nb.shares < nb.final_shares);
}

bool AsyncGossip::settled() const {
    // Checked on every wake of a done peer's loop: no list built.
    // A peer that left waited for its in-neighbours' last shares before it was done.
    return done() && (left_ || std::none_of(nbrs_.begin(), nbrs_.end(), [](const auto& entry) {
                          return awaits(entry.second);
                      }));
}

std::vector<int> AsyncGossip::settling_on() const {
    std::vector<int> waiting;
    for (const auto& [j, nb] : nbrs_)
        if (awaits(nb)) waiting.push_back(j);
    return waiting;
}

void AsyncGossip::on_peer_failed(Time now, int j, Actions& out) {
    if (j == rank() || j < 0 || j >= n()) return;
    Neighbour& nb = neighbour(j);
    if (nb.failed) return;
    nb.failed = true;
    collect_live_out();
    // A share still waiting for the edge to j never left: its mass comes back here.
    if (auto m = outbox_.take(j)) take_mass(rank(), *m);
    // j's mass before its latest split seen here: share / fraction, with the fraction at most
    // (1 - base_self) / k, so this is exact when j kept base_self and a lower bound otherwise.
    if (nb.last_share > 0) {
        const int k = std::max(1, std::min(options_.targets, base_->out_degree(j)));
        mutable_stats().mass_lost += nb.last_share * k / (1.0 - options_.self_base());
    }
    if (quiescing_) check_quiesced(now, out);
    if (joining() && j == sponsor_) ask_sponsor(out);  // async_elastic.cpp
    if (leaving_) check_left(out);
}

std::unique_ptr<Protocol> make_async(const json::Node* options, PeerContext ctx) {
    return std::make_unique<AsyncGossip>(std::move(ctx), parse_async_options(options));
}

}  // namespace gossamer::proto
