// async's checkpoints (docs/operations/checkpoint.md). Shares in flight at a cut would be lost or
// counted twice, so at a checkpoint step S the peer quiesces before it saves anything:
//   1. when its step S - 1 ends (its last push before the cut is out or in the outbox) it starts
//      no step, and tells each live out-neighbour how many shares it pushed to it in all (a
//      control message, chunk kControlCut, round S, edge_seq = the count);
//   2. it waits until its outbox is empty and, from each live in-neighbour, the count has come
//      and that many shares have arrived (and been added to (x, w): no step runs);
//   3. it saves (x, w) and its counters, then starts step S.
// Messages that belong after the cut (rounds >= S: shares a faster peer pushed after its own
// cut, rate reports, the next cut's counts) are held while this peer has not cut yet, and taken
// right after it. So the masses saved at S add up to those of the job with nothing in flight:
// sum w = n (minus what failed peers took), and a resumed job starts from exactly that.
// Nobody waits on a peer that waits: a peer's count and its shares before the cut leave before
// it waits for anything. Rates, arrival windows and deadlines are measured in time, so they are
// not saved; after a resume they are measured afresh (the rates last measured are kept).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "async_control.hpp"
#include "gossamer/optimizers/protocols/async/async_gossip.hpp"

namespace gossamer::proto {
namespace {

constexpr std::uint32_t kControlCut = async_control::kCut;

}  // namespace

std::int64_t AsyncGossip::next_cut() const {
    const std::int64_t every = checkpoint_every();
    if (every <= 0) return std::numeric_limits<std::int64_t>::max();
    const std::int64_t s = quiescing_ ? t_ : (t_ / every + 1) * every;
    return s < context().max_steps ? s : std::numeric_limits<std::int64_t>::max();
}

void AsyncGossip::send_cut_mark(const Neighbour& nb, Actions& out) {
    Message m;
    m.kind = MessageKind::control;
    m.chunk = kControlCut;
    m.receiver = nb.peer;
    m.round = t_;
    m.edge_seq = static_cast<std::uint64_t>(nb.pushes);
    send(out, std::move(m));
}

void AsyncGossip::begin_quiesce(Actions& out) {
    quiescing_ = true;
    for (const auto& [j, nb] : nbrs_)
        if (nb.out && usable(nb) && cuts_with(nb, t_)) send_cut_mark(nb, out);
    check_quiesced(now_, out);
}

bool AsyncGossip::quiesce_intercept(const Message& msg) {
    // A leaving peer cuts no more: it passes every share on as it comes (async_elastic.cpp).
    const std::int64_t cut = leaving_ ? -1 : next_cut();
    if (msg.kind == MessageKind::control && msg.chunk == kControlCut) {
        if (msg.round == cut) cut_marks_[msg.sender] = static_cast<std::int64_t>(msg.edge_seq);
        // An earlier cut's (this peer took no part in it), or any to a leaving peer.
        if (msg.round <= cut || leaving_) return true;
    }
    if (leaving_ || msg.round < cut) return false;
    held_.push_back(msg);
    return true;
}

void AsyncGossip::check_quiesced(Time now, Actions& out) {
    if (!quiescing_ || outbox_.pending() > 0) return;
    bool whole = true;  // every live edge takes part: the snapshot is one of a consistent cut
    for (const auto& [j, nb] : nbrs_) {
        if (nb.failed || nb.absent || nb.leaving) continue;
        // An admitted joiner's answer says whether the edge takes part here (it comes at once).
        if (nb.cut == CutEdge::asked && !nb.finished) return;
        if (!nb.finished && !cuts_with(nb, t_)) whole = false;
        if (!nb.in || nb.finished || !cuts_with(nb, t_)) continue;
        const auto it = cut_marks_.find(j);
        if (it == cut_marks_.end() || nb.shares < it->second) return;
    }
    absorb_buffer();
    if (whole) cut(t_);
    quiescing_ = false;
    cut_marks_.clear();
    release_held(now, out);
    if (math_.on()) math_.debias(params(), w_);
    out.start_step = true;
}

void AsyncGossip::release_held(Time now, Actions& out) {
    // What belongs after the cut, in the order it came (a later cut's messages are held again).
    std::vector<Message> later;
    later.swap(held_);
    for (Message& m : later) on_message(now, std::move(m), out);
}

// Cuts in an elastic job (docs/operations/elastic.md). A neighbour that entered takes no part in
// cuts (CutEdge::entering) until it is admitted; then it proposes its first checkpoint step after
// the step it entered at (kAdmitted) and each live neighbour answers with the edge's first cut
// (kCutFrom): the later of the proposal and the first cut the neighbour has not begun, so both
// ends quiesce together at every checkpoint step from there on. The admitted peer waits for the
// answers only at a checkpoint step (they come at once). A snapshot is taken only when every
// live edge takes part, so a joiner's first checkpoint is the first cut all its edges agreed on.
std::int64_t AsyncGossip::unbegun_cut() const {
    const std::int64_t every = checkpoint_every();
    return every > 0 ? (t_ / every + 1) * every : std::numeric_limits<std::int64_t>::max();
}

void AsyncGossip::agree_first_cuts(Actions& out) {
    if (checkpoint_every() <= 0) return;
    const std::int64_t proposal = unbegun_cut();
    for (auto& [j, nb] : nbrs_) {
        if (nb.cut == CutEdge::deferred) {  // it asked while this peer was joining
            answer_first_cut(nb, nb.cut_from, out);
            continue;
        }
        if (nb.failed || nb.absent || nb.leaving || nb.finished) continue;
        nb.cut = CutEdge::asked;
        send_control(out, j, async_control::kAdmitted, static_cast<std::uint64_t>(proposal));
    }
}

void AsyncGossip::answer_first_cut(Neighbour& nb, std::int64_t proposed, Actions& out) {
    std::int64_t first = std::max(proposed, unbegun_cut());
    if (done() || leaving_) first = static_cast<std::int64_t>(async_control::kNoCut);
    nb.cut = CutEdge::steady;
    nb.cut_from = first;
    send_control(out, nb.peer, async_control::kCutFrom, static_cast<std::uint64_t>(first));
}

void AsyncGossip::on_cut_agreement(const Message& msg, Neighbour& nb, Actions& out) {
    const auto value = static_cast<std::int64_t>(std::min(msg.edge_seq, async_control::kNoCut));
    if (msg.chunk == async_control::kAdmitted) {
        if (joining()) {  // answered once this peer knows its own steps
            nb.cut = CutEdge::deferred;
            nb.cut_from = value;
            return;
        }
        // Both were admitted at once and asked each other: the higher rank answers.
        if (nb.cut == CutEdge::asked && rank() < nb.peer) return;
        return answer_first_cut(nb, value, out);
    }
    if (nb.cut != CutEdge::asked) return;  // answered its proposal instead (the higher rank)
    nb.cut = CutEdge::steady;
    nb.cut_from = value;
    // Quiescing at this very step: the mark the edge owes goes out now.
    if (quiescing_ && nb.out && usable(nb) && cuts_with(nb, t_)) send_cut_mark(nb, out);
    check_quiesced(now_, out);
}

void AsyncGossip::save_state(StateWriter& w) const {
    w.i64(t_);
    w.f64(w_);
    w.f64(self_share_);
    std::uint64_t rng[4];
    rng_.get_state(rng);
    for (auto v : rng) w.u64(v);
    // The base graph's neighbours: a failure report about another rank (a crash elsewhere in
    // the job) also makes an entry, which is no edge of this peer's and not its state.
    std::uint64_t edges = 0;
    for (const auto& [j, nb] : nbrs_) edges += nb.in || nb.out;
    w.u64(edges);
    for (const auto& [j, nb] : nbrs_) {
        const Neighbour& e = nb;
        if (!e.in && !e.out) continue;
        w.u32(static_cast<std::uint32_t>(j));
        w.i64(e.pushes);
        w.i64(e.last_push);
        w.f64(e.last_fraction);
        w.f64(e.weight_sent);
        w.i64(e.shares);
        w.f64(e.weight_received);
        w.i64(e.absorbed);
        w.f64(e.rate);
        w.f64(e.reported_self);
        w.i64(e.reports);
    }
}

void AsyncGossip::restore_state(StateReader& r) {
    t_ = r.counter("async steps");
    w_ = r.f64("async weight");
    if (!(w_ > 0) || !std::isfinite(w_)) r.fail(fmt::format("async weight {} is not > 0", w_));
    self_share_ = r.f64("async self share");
    std::uint64_t rng[4];
    for (auto& v : rng) v = r.u64("async sampling state");
    rng_.set_state(rng);
    const auto count = r.count("async neighbours", static_cast<std::uint64_t>(n()));
    std::uint64_t edges = 0;
    for (const auto& [j, nb] : nbrs_) edges += nb.in || nb.out;
    if (count != edges)
        r.fail(
            fmt::format("{} neighbours in the checkpoint, {} in this job's graph", count, edges));
    // A neighbour keeps its counters in 32 bits (a job takes at most INT32_MAX steps).
    const auto count32 = [&](const char* what) {
        const std::int64_t v = r.counter(what);
        if (v > std::numeric_limits<std::int32_t>::max())
            r.fail(fmt::format("async {} {} is past this job's steps", what, v));
        return static_cast<std::int32_t>(v);
    };
    for (std::uint64_t k = 0; k < count; ++k) {
        const int j = static_cast<int>(r.u32("a neighbour"));
        auto it = nbrs_.find(j);
        if (it == nbrs_.end() || (!it->second.in && !it->second.out))
            r.fail(fmt::format("peer {} is not a neighbour in this graph", j));
        Neighbour& e = it->second;
        e.pushes = count32("pushes");
        e.last_push = count32("last push");
        e.last_fraction = r.f64("last fraction");
        e.weight_sent = r.f64("weight sent");
        e.shares = count32("shares");
        e.weight_received = r.f64("weight received");
        e.absorbed = count32("shares absorbed");
        e.rate = r.f64("rate");
        e.reported_self = r.f64("reported self share");
        e.reports = count32("reports");
    }
}

}  // namespace gossamer::proto
