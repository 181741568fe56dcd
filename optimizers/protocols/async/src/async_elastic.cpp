// async in an elastic job (docs/operations/elastic.md): join, graceful leave and rejoin with the
// mass exact.
//
// Join: the peer (absent until now for everyone) tells its live neighbours it is here (kJoined)
// and asks its lowest live neighbour rank to sponsor it (kSponsor). At its next step boundary
// the sponsor keeps (x/2, w/2) and sends the other half as a full_model message whose weight is
// w/2 and whose round is its step count; the joiner adds it to whatever shares reached it
// meanwhile and starts stepping at that step count. A rejoining peer keeps its own model z (its
// checkpoint's, or the one it had at its crash) and takes only the mass: x = w z with the w the
// sponsor sent (the sponsor's x/2 is dropped, so both keep their own z). Sum w does not change.
//
// Leave: at its next step boundary the peer hands (x, w) to its live out-neighbours (finished
// ones too; with none, its live in-neighbours) in equal parts and tells every neighbour (kLeaving).
// They push nothing more to it and answer with the count of shares they pushed to it (kLeaveAck);
// shares still on their way are passed on whole to a live out-neighbour as they come. Once every
// live in-neighbour answered and its shares are all here, the peer sends its own counts (kFinished)
// and is done: no mass stays behind.
#include <fmt/format.h>

#include <algorithm>

#include "async_control.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocols/async/async_gossip.hpp"

namespace gossamer::proto {

double AsyncGossip::held_mass() const {
    double held = w_ + buf_w_ + outbox_.pending_weight();
    for (const Message& m : late_answers_) held += m.weight;
    for (const Message& m : held_)
        if (m.kind == MessageKind::mass_share) held += m.weight;
    return held;
}

void AsyncGossip::send_control(Actions& out, int to, std::uint32_t code, std::uint64_t seq) {
    Message m;
    m.kind = MessageKind::control;
    m.chunk = code;
    m.receiver = to;
    m.round = t_;
    m.edge_seq = seq;
    m.sent_at = now_;
    send(out, std::move(m));
}

void AsyncGossip::on_peer_absent(int j) {
    auto it = nbrs_.find(j);
    if (it == nbrs_.end()) return;  // not a neighbour: nothing to do
    it->second.absent = true;
    collect_live_out();
}

void AsyncGossip::reset_neighbour(Neighbour& nb, Time entered_at) {
    // A new incarnation counts its edges from zero: shares, pushes and the final counts.
    nb.failed = nb.finished = nb.absent = nb.leaving = false;
    nb.final_shares = -1;
    nb.shares = 0;
    nb.pushes = 0;
    nb.last_push = -1;
    nb.late_now = false;
    nb.arrivals.set_capacity(nb.arrivals.capacity());  // empties it
    nb.heard.set_capacity(nb.heard.capacity());
    nb.armed = false;
    nb.ack_due = false;
    nb.entered_at = entered_at;
    nb.cut = CutEdge::entering;  // no part in cuts until it is admitted (async_state.cpp)
    nb.cut_from = static_cast<std::int64_t>(async_control::kNoCut);
    collect_live_out();
}

void AsyncGossip::on_join(Time now, Entry entry, Actions& out) {
    now_ = now;
    entry_ = entry;
    if (math_.on()) {
        // The model it comes back with (rejoin): z = x / w of the worker (w = 1 unless restored
        // from a checkpoint). x and w then start empty: shares and the sponsor's half add up.
        const auto x = params();
        if (entry == Entry::rejoin) {
            own_model_.resize(x.size());
            math_.debias_to_host(x, w_, own_model_);
        }
        math_.keep(x, 0.0);
    }
    w_ = 0.0;
    // A new incarnation counts every edge from zero, as its neighbours will once they hear of it
    // (a checkpoint's counts included: restore() brought them back).
    for (auto& [j, nb] : nbrs_) {
        const bool absent = nb.absent, failed = nb.failed;
        reset_neighbour(nb, now);
        nb.absent = absent;
        nb.failed = failed;
    }
    collect_live_out();
    quiescing_ = false;
    cut_marks_.clear();
    held_.clear();
    ask_sponsor(out);
    for (const auto& [j, nb] : nbrs_)
        if (j != sponsor_ && !nb.absent && !nb.failed)
            send_control(out, j, async_control::kJoined, 0);
}

void AsyncGossip::ask_sponsor(Actions& out) {
    // The lowest live neighbour rank, in or out: a direct message needs no edge of the graph.
    sponsor_ = -1;
    for (const auto& [j, nb] : nbrs_)
        if (!nb.absent && !nb.failed && !nb.leaving) {  // a finished peer still has mass
            sponsor_ = j;
            break;
        }
    if (sponsor_ < 0)
        throw Error(
            fmt::format("async: peer {} enters the job but none of its neighbours is "
                        "live, so none can sponsor it (docs/operations/elastic.md)",
                        rank()));
    send_control(out, sponsor_, async_control::kSponsor, entry_ == Entry::rejoin ? 1 : 0);
}

void AsyncGossip::serve_sponsored(Actions& out) {
    if (asks_.empty() || stepping() || joining()) return;
    std::vector<std::pair<int, bool>> later;
    for (const auto& [j, rejoin] : asks_) {
        if (leaving_) {  // nothing left to split: the joiner asks its next neighbour
            send_control(out, j, async_control::kLeaving, 0);
            neighbour(j).ack_due = neighbour(j).in;
            continue;
        }
        if (options_.outbox && !outbox_.free(j)) {
            later.emplace_back(j, rejoin);  // one data message in flight per edge
            continue;
        }
        Message m;
        m.kind = MessageKind::full_model;
        m.receiver = j;
        m.round = t_;
        m.sent_at = now_;
        m.weight = w_ / 2;
        w_ -= m.weight;
        const auto x = params();
        if (math_.on() && !rejoin) m.payload = math_.share(x, 0.5);
        if (math_.on()) math_.keep(x, 0.5);
        m.elements = rejoin ? 0 : worker().size();
        send(out, std::move(m));
        if (options_.outbox) outbox_.sent(j, out.sends.back().id);
    }
    asks_.swap(later);
}

bool AsyncGossip::on_membership(Time now, const Message& msg, Neighbour& nb, Actions& out) {
    now_ = now;
    const int j = nb.peer;
    if (msg.kind == MessageKind::full_model) {
        on_admitted(now, msg, out);
        return true;
    }
    if (msg.kind != MessageKind::control || msg.chunk < async_control::kJoined) return false;
    switch (msg.chunk) {
        case async_control::kJoined:
        case async_control::kSponsor:
            reset_neighbour(nb, msg.sent_at);
            if (left_) {  // gone already: it neither sponsors nor sends anything more
                send_control(out, j, async_control::kLeaving, 0);
                send_control(out, j, async_control::kFinished, 0);
                return true;
            }
            if (msg.chunk == async_control::kSponsor) asks_.emplace_back(j, msg.edge_seq == 1);
            if (leaving_ && msg.chunk == async_control::kJoined) {
                send_control(out, j, async_control::kLeaving, 0);
                neighbour(j).ack_due = neighbour(j).in;
            } else if (done() && !leaving_) {
                send_control(out, j, async_control::kFinished, 0);  // push nothing here
            }
            serve_sponsored(out);
            return true;
        case async_control::kLeaving:
            nb.leaving = true;
            collect_live_out();
            // Every push to it counts, those still in the outbox too (they go out and it passes
            // them on); no more follow.
            send_control(out, j, async_control::kLeaveAck, static_cast<std::uint64_t>(nb.pushes));
            if (joining() && j == sponsor_) ask_sponsor(out);
            return true;
        case async_control::kAdmitted:
        case async_control::kCutFrom:
            on_cut_agreement(msg, nb, out);  // async_state.cpp
            return true;
        case async_control::kLeaveAck:
            nb.final_shares = async_control::count32(msg.edge_seq);
            nb.ack_due = false;
            check_left(out);
            return true;
        default:
            throw Error(
                fmt::format("async: an unknown control message ({}) from peer {}", msg.chunk, j));
    }
}

void AsyncGossip::on_admitted(Time now, const Message& msg, Actions& out) {
    const bool rejoin = msg.payload.empty();  // a rejoin's answer carries no model
    if (math_.on() && !rejoin && msg.payload.size() != worker().size())
        throw Error(
            fmt::format("async: the sponsor's model from peer {} carries {} values, "
                        "expected {}",
                        msg.sender, msg.payload.size(), worker().size()));
    if (!joining()) {
        // A second sponsor's answer: the peer asked again when its first sponsor left or failed
        // while the first answer was on its way. The mass is real (that sponsor halved its own):
        // it is added as a share; a rejoin's answer scales x so that z stays.
        if (stepping()) return late_answers_.push_back(msg);  // x is the compute side's now
        if (math_.on() && rejoin && w_ > 0) math_.keep(params(), (w_ + msg.weight) / w_);
        if (math_.on() && !rejoin) math_.add(params(), msg.payload);
        w_ += msg.weight;
        return;
    }
    w_ += msg.weight;
    if (math_.on()) {
        if (rejoin) {
            std::vector<float> mine(own_model_.size());
            for (std::size_t i = 0; i < mine.size(); ++i)
                mine[i] = static_cast<float>(msg.weight * own_model_[i]);
            math_.add(params(), mine);
        } else {
            math_.add(params(), msg.payload);
        }
    }
    mark_admitted();
    t_ = std::max(t_, msg.round);
    worker().enter_at(t_);
    history_.push_back(now);
    agree_first_cuts(out);   // async_state.cpp
    release_held(now, out);  // held for a cut of the steps before it entered
    serve_sponsored(out);    // a neighbour that joined meanwhile and asked this peer
    if (leave_due_) return hand_over(out);
    if (t_ >= context().max_steps) return finish(out);
    if (math_.on()) math_.debias(params(), w_);
    out.start_step = true;
}

void AsyncGossip::on_leave(Time now, Actions& out) {
    now_ = now;
    if (done() || leaving_) return;
    leave_due_ = true;
    if (stepping() || joining()) return;  // at the step boundary, or once admitted
    hand_over(out);
}

void AsyncGossip::hand_over(Actions& out) {
    leave_due_ = false;
    leaving_ = true;
    absorb_buffer();
    serve_sponsored(out);  // answers who still asks: it leaves
    const std::vector<int> targets = takers();
    const auto k = static_cast<double>(targets.size());
    const std::span<float> x = params();
    double left = w_;
    for (std::size_t i = 0; i < targets.size(); ++i) {
        Neighbour& e = nbrs_.at(targets[i]);
        Message m;
        m.kind = MessageKind::mass_share;
        m.receiver = targets[i];
        m.round = t_;
        m.sent_at = now_;
        m.elements = worker().size();
        m.edge_seq = static_cast<std::uint64_t>(e.pushes++);
        // The last part takes what is left, so the parts add up to w exactly.
        m.weight = i + 1 == targets.size() ? left : w_ / k;
        left -= m.weight;
        e.weight_sent += m.weight;
        e.last_push = static_cast<std::int32_t>(t_);
        if (math_.on()) m.payload = math_.share(x, 1.0 / k);
        post(out, std::move(m));
    }
    if (!targets.empty()) {
        w_ = 0.0;  // nobody live to take it: the mass stays here and counts as held
        if (math_.on()) math_.keep(x, 0.0);
    }
    for (auto& [j, nb] : nbrs_) {
        if (nb.absent || nb.failed) continue;
        nb.ack_due = nb.in;
        Message m;
        m.kind = MessageKind::control;
        m.chunk = async_control::kLeaving;
        m.receiver = j;
        m.round = t_;
        m.sent_at = now_;
        send(out, std::move(m));
    }
    // A leave during a cut ends it: the neighbours stop waiting for this peer (kLeaving), and
    // what was held for after the cut is passed on.
    quiescing_ = false;
    cut_marks_.clear();
    release_held(now_, out);
    check_left(out);
}

std::vector<int> AsyncGossip::takers() const {
    // Live out-neighbours, finished ones too: they still take shares (they wait for this
    // peer's final count), and near the end of a job they may be all that is left. With none,
    // live in-neighbours: a hand-over is a direct message and needs no edge of the graph.
    std::vector<int> out, in;
    for (const auto& [j, nb] : nbrs_)
        if (!nb.failed && !nb.absent && !nb.leaving) (nb.out ? out : in).push_back(j);
    return out.empty() ? in : out;
}

void AsyncGossip::pass_on(const Message& msg, Actions& out) {
    // The first live out-neighbour by rank takes it whole; with none, it stays here.
    const std::vector<int> targets = takers();
    if (targets.empty()) {
        w_ += msg.weight;
        if (math_.on()) math_.add(params(), msg.payload);
    } else {
        const int to = targets.front();
        Neighbour& e = nbrs_.at(to);
        Message m = msg;
        m.receiver = to;
        m.round = t_;
        m.sent_at = now_;
        m.edge_seq = static_cast<std::uint64_t>(e.pushes++);
        e.weight_sent += m.weight;
        post(out, std::move(m));
    }
    check_left(out);
}

void AsyncGossip::check_left(Actions& out) {
    if (!leaving_ || left_) return;
    for (const auto& [j, nb] : nbrs_) {
        if (!nb.in || nb.absent || nb.failed) continue;
        if (nb.ack_due || nb.shares < nb.final_shares) return;
    }
    left_ = true;
    finish(out);  // every neighbour gets its final count: nothing more comes from here
}

}  // namespace gossamer::proto
