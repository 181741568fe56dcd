// dpsgd in an elastic job (docs/operations/elastic.md). No mass to keep: what matters is that every
// peer agrees, per edge, from which round on a neighbour's state is mixed.
//
// Join: the peer asks its lowest live neighbour rank (the sponsor) for its model; the sponsor
// answers between steps with x and the round r it works on. The joiner copies x (a rejoining
// peer keeps its own model: its checkpoint's, or the one it had at the crash) and enters at
// round R = r + kJoinMargin, telling every live neighbour (kJoined, round R). Both kJoined and
// the answer kJoinAck are *declarations*: "my stream to you restarts at round S" (new replicas,
// the first message a full model). The receiver of one takes a fresh replica, drops older
// rounds of that sender, and mixes it from max(S, its own round). A neighbour answers a joiner
// with S = max(R, its next round to send); the joiner waits for that answer from each live
// in-neighbour before it mixes, and gives an in-neighbour's weight to its own weight in the
// rounds before the neighbour's S. A peer still joining takes a declaration at once and answers
// it once it knows its own rounds.
//
// Leave: between steps (a running step is finished and its round not sent) the peer tells
// every live neighbour the last round it sent (kLeaving); they mix its state up to that round
// and move its weight to their own afterwards, as for a failed peer. Then it is done.
#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocols/dpsgd/dpsgd.hpp"

namespace gossamer::proto {
namespace {

// Membership messages are of partition 0 with a chunk index no channel has (channels number
// their chunks below 2^16): kMembership plus the code; the sponsor's answer is kMembership.
constexpr std::uint32_t kMembership = 0x80000000u;
constexpr std::uint32_t kSponsor = kMembership + 1;  // edge_seq 1: a rejoin (no model back)
constexpr std::uint32_t kJoined = kMembership + 2;   // round: the joiner's first round
constexpr std::uint32_t kJoinAck = kMembership + 3;  // round: its first round to the joiner
constexpr std::uint32_t kLeaving = kMembership + 4;  // round: the last round the sender sent
// Rounds a joiner starts past its sponsor's, so that neighbours a round or two ahead of the
// sponsor need not wait for it to catch up.
constexpr std::int64_t kJoinMargin = 2;

}  // namespace

std::string Dpsgd::elastic_refusal() const {
    const char* what = options_.delay > 0               ? "delay 1"
                       : options_.reweight              ? "reweight"
                       : options_.partition_ready       ? "partition_ready"
                       : !context().worker->multirate() ? nullptr
                       // A multirate section has its source; streaming fragments have none.
                       : context().worker->multirate()->source ? "multirate partitions"
                                                               : "outer.fragments (streaming)";
    return what ? fmt::format(
                      "algorithm dpsgd with {} cannot join, leave or rejoin a running job "
                      "yet (docs/operations/elastic.md); drop it",
                      what)
                : "";
}

bool Dpsgd::mixes_with(int j, std::int64_t round) const {
    const auto it = mix_rounds_.find(j);
    return it == mix_rounds_.end() || (round >= it->second.from && round <= it->second.until);
}

bool Dpsgd::sends_to(int j, std::int64_t round) const {
    const auto it = send_rounds_.find(j);
    return it == send_rounds_.end() || (round >= it->second.from && round <= it->second.until);
}

void Dpsgd::send_member(Actions& out, Time now, int to, std::uint32_t code, std::int64_t round) {
    Message m;
    m.kind = MessageKind::control;
    m.chunk = code;
    m.receiver = to;
    m.round = round;
    m.sent_at = now;
    send(out, std::move(m));
}

void Dpsgd::on_peer_absent(int j) {
    dead_.insert(j);
}

bool Dpsgd::entered_cut() const {
    // A joiner's edges restart at the rounds its join declared: its first round R and each
    // neighbour's answer (the first round it sends to the joiner, at or after the round from
    // which it mixes the joiner). A cut before the latest of them would hold an edge still
    // restarting, so the joiner's first checkpoint is the first checkpoint step at or after it
    // once every neighbour it told has answered (or left, or failed).
    return cut_acks_due_.empty() && t_ >= cut_floor_;
}

void Dpsgd::on_join(Time now, Entry entry, Actions& out) {
    entry_ = entry;
    if (elastic_refusal() != "") throw Error(elastic_refusal());
    ask_sponsor(now, out);
}

void Dpsgd::ask_sponsor(Time now, Actions& out) {
    const auto& g = context().topology->base_graph();
    std::vector<int> live;
    for (int j : g.in_neighbors(rank())) live.push_back(j);
    for (int j : g.out_neighbors(rank())) live.push_back(j);
    std::sort(live.begin(), live.end());
    sponsor_ = -1;
    for (int j : live)
        if (!dead_.contains(j) && mixes_with(j, std::numeric_limits<std::int64_t>::max())) {
            sponsor_ = j;
            break;
        }
    if (sponsor_ < 0)
        throw Error(
            fmt::format("dpsgd: peer {} enters the job but none of its neighbours is "
                        "live, so none can sponsor it (docs/operations/elastic.md)",
                        rank()));
    Message m;
    m.kind = MessageKind::control;
    m.chunk = kSponsor;
    m.receiver = sponsor_;
    m.edge_seq = entry_ == Entry::rejoin ? 1 : 0;
    m.sent_at = now;
    send(out, std::move(m));
}

void Dpsgd::serve_sponsored(Time now, Actions& out) {
    if (asks_.empty() || stage_ == Stage::stepping || joining()) return;
    for (const auto& [j, rejoin] : asks_) {
        if (left_) {  // gone: the joiner asks its next neighbour
            send_member(out, now, j, kLeaving, sent_ - 1);
            continue;
        }
        Message m;
        m.kind = MessageKind::full_model;
        m.chunk = kMembership;
        m.receiver = j;
        m.round = t_;
        m.sent_at = now;
        if (worker().math() && !rejoin) {
            m.payload.resize(worker().size());
            copy_params_to(m.payload);
        }
        m.elements = rejoin ? 0 : worker().size();
        send(out, std::move(m));
    }
    asks_.clear();
}

void Dpsgd::declared(int j, std::int64_t start) {
    dead_.erase(j);
    for (Channel& c : channels_) c.in.erase(j);  // its next message is a full model
    stream_start_[j] = start;
    mix_rounds_[j] = {std::max(start, t_), std::numeric_limits<std::int64_t>::max()};
}

void Dpsgd::answer_joined(Time now, int j, std::int64_t first, Actions& out) {
    if (left_) return send_member(out, now, j, kLeaving, sent_ - 1);
    for (Channel& c : channels_) {
        c.out.erase(j);
        if (auto it = c.sent_at.find(j); it != c.sent_at.end()) it->second.clear();
    }
    const std::int64_t start = std::max(first, sent_);
    send_rounds_[j] = {start, std::numeric_limits<std::int64_t>::max()};
    send_member(out, now, j, kJoinAck, start);
}

bool Dpsgd::on_membership(Time now, const Message& msg, Actions& out) {
    const int j = msg.sender;
    if (const auto it = entered_at_.find(j); it != entered_at_.end() && msg.sent_at < it->second)
        return true;  // sent by its previous incarnation, before its crash
    if (msg.chunk < kMembership) {
        // A model message of j's stream before it restarted (a declaration since): dropped.
        const auto it = stream_start_.find(j);
        return msg.kind != MessageKind::control && it != stream_start_.end() &&
               msg.round < it->second;
    }
    if (msg.kind == MessageKind::full_model) {         // the sponsor's answer
        if (!joining() || j != sponsor_) return true;  // a sponsor asked before: stale
        if (worker().math() && entry_ == Entry::fresh) {
            if (msg.payload.size() != worker().size())
                throw Error(
                    fmt::format("dpsgd: the sponsor's model from peer {} carries {} "
                                "values, expected {}",
                                j, msg.payload.size(), worker().size()));
            const auto x = params();
            if (Device* d = worker().device())
                d->upload(x.data(), msg.payload);
            else
                std::copy(msg.payload.begin(), msg.payload.end(), x.begin());
        }
        const std::int64_t start = msg.round + kJoinMargin;
        t_ = sent_ = start;
        for (Channel& c : channels_) {
            c.round = start;
            // Every stream of this peer restarts at R (kJoined says so), and it takes only the
            // streams declared to it since it began joining: a checkpoint's replicas
            // (restore()) are of an earlier job.
            c.out.clear();
            c.sent_at = {};
            for (auto it = c.in.begin(); it != c.in.end();)
                it = stream_start_.contains(it->first) ? std::next(it) : c.in.erase(it);
        }
        worker().enter_at(start);
        mark_admitted();
        const auto& g = context().topology->base_graph();
        std::set<int> told;
        for (int k : g.in_neighbors(rank()))
            if (!dead_.contains(k)) acks_due_.insert(k), told.insert(k);
        for (int k : g.out_neighbors(rank()))
            if (!dead_.contains(k)) told.insert(k);
        cut_acks_due_ = told;  // entered_cut()
        cut_floor_ = start;
        for (int k : told) {
            Message m;
            m.kind = MessageKind::control;
            m.chunk = kJoined;
            m.receiver = k;
            m.round = start;
            m.sent_at = now;
            send(out, std::move(m));
        }
        serve_sponsored(now, out);
        for (const Message& h : std::exchange(held_joins_, {})) {
            mix_rounds_[h.sender].from = std::max(stream_start_[h.sender], t_);
            answer_joined(now, h.sender, h.round, out);
        }
        if (leave_due_) return leave_now(now, out), true;
        if (t_ >= context().max_steps) {
            stage_ = Stage::done;
            out.done = true;
            return true;
        }
        begin_round(now, out);
        return true;
    }
    switch (msg.chunk) {
        case kSponsor:
            asks_.emplace_back(j, msg.edge_seq == 1);
            serve_sponsored(now, out);
            return true;
        case kJoined:
            // j entered (a new peer or a new incarnation): its stream to this peer starts at R.
            entered_at_[j] = msg.sent_at;
            declared(j, msg.round);
            if (joining())
                held_joins_.push_back(msg);  // answered once this peer knows its own rounds
            else
                answer_joined(now, j, msg.round, out);
            try_mix(now, out);
            return true;
        case kJoinAck:  // j's answer to ours: its stream to this peer restarts there
            declared(j, msg.round);
            acks_due_.erase(j);
            if (cut_acks_due_.erase(j) > 0) cut_floor_ = std::max(cut_floor_, msg.round);
            try_mix(now, out);
            return true;
        case kLeaving:
            mix_rounds_[j].until = msg.round;
            send_rounds_[j].until = std::min(msg.round, sent_ - 1);
            acks_due_.erase(j);
            cut_acks_due_.erase(j);
            if (joining() && j == sponsor_) ask_sponsor(now, out);
            try_mix(now, out);
            return true;
        default:
            throw Error(fmt::format("dpsgd: an unknown membership message ({}) from peer {}",
                                    msg.chunk, j));
    }
}

void Dpsgd::on_leave(Time now, Actions& out) {
    if (stage_ == Stage::done || left_) return;
    if (elastic_refusal() != "") throw Error(elastic_refusal());
    leave_due_ = true;
    if (stage_ == Stage::stepping || joining()) return;  // at the step's end, or once admitted
    leave_now(now, out);
}

void Dpsgd::leave_now(Time now, Actions& out) {
    leave_due_ = false;
    left_ = true;
    stage_ = Stage::done;       // (also when a step just ended: serve_sponsored checks)
    serve_sponsored(now, out);  // who still asks is told this peer leaves
    const auto& g = context().topology->base_graph();
    std::set<int> told;
    for (int k : g.in_neighbors(rank())) told.insert(k);
    for (int k : g.out_neighbors(rank())) told.insert(k);
    for (int k : told)
        if (!dead_.contains(k)) send_member(out, now, k, kLeaving, sent_ - 1);
    stage_ = Stage::done;
    out.done = true;
}

}  // namespace gossamer::proto
