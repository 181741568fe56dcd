// The all-reduce baseline in an elastic job (docs/algorithms/allreduce.md, "Elastic jobs"): with
// "elastic": "rebuild" the ring is rebuilt over the live members at a round boundary, with
// "restart" every member restarts from the last in-memory checkpoint (torchrun's behaviour).
//
// A ring is an *epoch* named by its key, epoch * n + proposer (later keys win; two proposers of
// one epoch are ordered by rank). A failure, a graceful leave (kLeaving) or a restarted member's
// kJoin abandons the running all-reduce; a fresh joiner's kJoin waits for the leader's next
// round boundary. The leader (the lowest live rank of the installed ring) proposes the new ring
// to its members (kPropose: the ranks); each answers between two of its steps (kReady: how far
// it is, standing()); the leader then names the member furthest ahead as the source (kSource),
// which sends its whole state (kSync pieces: the round count and its worker's x, optimizer
// state and step count; in restart mode its last checkpoint) to every other member. Every member
// installs the ring when it has the state, so all start the epoch bit for bit identical. If a
// member of a proposal fails before the ring is installed, the (new) leader proposes again with
// a later key. A done member keeps taking control messages until every member of its ring said
// it is done too (kDone), so a member stuck in the last all-reduce still gets the final state.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocol/ring.hpp"
#include "gossamer/optimizers/protocols/allreduce/allreduce.hpp"

namespace gossamer::proto {
namespace {

constexpr std::uint32_t kJoin = 1;     // the sender enters the job
constexpr std::uint32_t kPropose = 2;  // round: key; payload: the ring's ranks
constexpr std::uint32_t kReady = 3;    // round: key; offset: standing() + 1
constexpr std::uint32_t kSource = 4;   // round: key; payload: the ranks to send the state to
constexpr std::uint32_t kLeaving = 5;  // the sender leaves gracefully
constexpr std::uint32_t kDone = 6;     // the sender took its last step
constexpr std::uint32_t kSync = 7;     // full_model; round: key; offset: first value; edge_seq: all

std::vector<float> to_floats(const std::vector<int>& ranks) {
    return {ranks.begin(), ranks.end()};
}

// `ranks` without `r`, in the same order.
std::vector<int> without(const std::vector<int>& ranks, int r) {
    std::vector<int> out;
    for (int q : ranks)
        if (q != r) out.push_back(q);
    return out;
}

// Per rank of 0..n-1: whether it is in `ranks`.
std::vector<char> mask(const std::vector<int>& ranks, int n) {
    std::vector<char> in(static_cast<std::size_t>(n), 0);
    for (int r : ranks) in[static_cast<std::size_t>(r)] = 1;
    return in;
}

}  // namespace

std::string AllreduceProtocol::elastic_refusal() const {
    if (!elastic())
        return "algorithm allreduce stops when a peer fails or leaves unless its options say "
               "otherwise; set \"elastic\": \"rebuild\" (the ring rebuilt over the live members) "
               "or \"restart\" (every member restarts from the last checkpoint) in "
               "algorithms.allreduce (docs/operations/elastic.md)";
    if (!context().worker->checkpointable())
        return "algorithm allreduce with \"elastic\" needs a worker that can hand its state to "
               "another member (host memory; docs/operations/elastic.md)";
    return "";
}

void AllreduceProtocol::set_ring(std::vector<int> members) {
    members_ = std::move(members);
    const auto it = std::find(members_.begin(), members_.end(), rank());
    pos_ = it == members_.end() ? 0 : static_cast<int>(it - members_.begin());
    steps_ = ring::steps(m());
    edge_seq_ = 0;
}

bool AllreduceProtocol::in_ring(int r) const {
    return std::find(members_.begin(), members_.end(), r) != members_.end();
}

int AllreduceProtocol::leader() const {
    if (joining()) return -1;  // a joiner leads nothing until it is in a ring
    // A member that restarted is a joiner again until a ring takes it in: it leads nothing.
    for (int r : members_)
        if (alive_[static_cast<std::size_t>(r)] && !joiners_.count(r)) return r;
    return -1;
}

std::int64_t AllreduceProtocol::standing() const {
    if (joining()) return -1;
    if (options_.elastic == AllreduceOptions::Elastic::restart) return checkpoint_step_;
    return round_;
}

void AllreduceProtocol::on_peer_absent(int r) {
    alive_[static_cast<std::size_t>(r)] = 0;
    set_ring(without(members_, r));
}

void AllreduceProtocol::send_control(Actions& out, int to, std::uint32_t code, std::int64_t key,
                                     std::uint64_t value, const std::vector<int>& ranks) {
    Message msg;
    msg.kind = MessageKind::control;
    msg.receiver = to;
    msg.chunk = code;
    msg.round = key;
    msg.offset = value;
    msg.sent_at = now_;
    msg.payload = to_floats(ranks);
    msg.elements = msg.payload.size();
    send(out, std::move(msg));
}

void AllreduceProtocol::on_join(Time now, Entry, Actions& out) {
    now_ = now;
    if (!elastic_refusal().empty()) throw Error(elastic_refusal());
    // Whatever the entry, the job's state comes from the ring's source (the checkpoint a
    // rejoining peer restored is overwritten: the job moved on).
    syncing_ = true;
    set_ring(without(members_, rank()));
    int told = 0;
    for (int r = 0; r < n(); ++r)
        if (r != rank() && alive_[static_cast<std::size_t>(r)]) {
            send_control(out, r, kJoin, 0);
            ++told;
        }
    if (told == 0)
        throw Error(fmt::format("allreduce: peer {} enters the job but no member is live", rank()));
}

void AllreduceProtocol::on_leave(Time now, Actions& out) {
    now_ = now;
    if (!elastic_refusal().empty()) throw Error(elastic_refusal());
    if (done()) return;
    leaving_ = true;
    // At a round boundary: between steps with no all-reduce running (else at its end).
    if (!stepping() && (!active_ || syncing_)) leave_now(out);
}

void AllreduceProtocol::leave_now(Actions& out) {
    for (int r = 0; r < n(); ++r)
        if (r != rank() && alive_[static_cast<std::size_t>(r)]) send_control(out, r, kLeaving, 0);
    active_ = false;
    out.done = true;
}

void AllreduceProtocol::abort_round() {
    syncing_ = true;
    active_ = false;
    for (auto it = pending_.begin(); it != pending_.end();)
        it = std::get<0>(it->first) <= key_ ? pending_.erase(it) : std::next(it);
}

void AllreduceProtocol::lost(Time now, int r, Actions& out) {
    now_ = now;
    auto& alive = alive_[static_cast<std::size_t>(r)];
    if (!alive) return;
    alive = 0;
    joiners_.erase(r);
    const bool involved =
        in_ring(r) ||
        std::find(accepted_members_.begin(), accepted_members_.end(), r) != accepted_members_.end();
    if (!involved) return;
    if (!done()) abort_round();
    if (leaving_) {  // the all-reduce it meant to finish will not: leave at once
        if (!stepping() && !done()) leave_now(out);
        return;
    }
    if (leader() != rank()) return;
    // A done leader proposes only for members still short of the end.
    const bool needed = !done() || std::any_of(members_.begin(), members_.end(), [&](int q) {
        return alive_[static_cast<std::size_t>(q)] && !finished_.count(q);
    });
    if (!needed) return;
    want_propose_ = true;
    if (!stepping()) propose(out);
}

void AllreduceProtocol::propose(Actions& out) {
    want_propose_ = false;
    ++max_epoch_;
    const auto member = mask(members_, n());
    std::vector<int> ring;
    for (int r = 0; r < n(); ++r) {
        const auto i = static_cast<std::size_t>(r);
        if (alive_[i] && (member[i] || joiners_.count(r) || r == rank())) ring.push_back(r);
    }
    proposal_ = Proposal{max_epoch_ * n() + rank(), ring, {}};
    accepted_ = proposal_.key;
    accepted_members_ = ring;
    if (!done()) abort_round();
    proposal_.ready[rank()] = standing();
    for (int r : ring)
        if (r != rank()) send_control(out, r, kPropose, proposal_.key, 0, ring);
    maybe_choose_source(out);
}

void AllreduceProtocol::answer(Actions& out) {
    answer_after_step_ = false;
    send_control(out, static_cast<int>(accepted_ % n()), kReady, accepted_,
                 static_cast<std::uint64_t>(standing() + 1));
}

void AllreduceProtocol::maybe_choose_source(Actions& out) {
    const auto& p = proposal_;
    if (p.key < 0 || p.ready.size() < p.members.size()) return;
    int source = rank();
    for (const auto& [r, standing] : p.ready)  // the furthest ahead; the lowest rank of equals
        if (standing > p.ready.at(source) || (standing == p.ready.at(source) && r < source))
            source = r;
    const std::vector<int> ring = p.members;
    const std::int64_t key = p.key;
    proposal_ = Proposal{};
    if (source != rank()) return send_control(out, source, kSource, key, 0, ring);
    send_sync(without(ring, rank()), out);
    install(key, ring, out);
}

std::vector<char> AllreduceProtocol::pack_state() const {
    StateWriter w;
    w.tag("allreduce sync");
    w.i64(round_);
    context().worker->save_state(w);
    return w.bytes();
}

void AllreduceProtocol::send_sync(const std::vector<int>& to, Actions& out) {
    const bool restart = options_.elastic == AllreduceOptions::Elastic::restart;
    // A done source's state is the job's result: nothing to restart from.
    const bool rollback = restart && !done();
    const std::vector<char> state = rollback ? checkpoint_ : pack_state();
    if (rollback) adopt(state);  // the source restarts from its checkpoint too
    // The bytes as floats (bit copies), in pieces no longer than a model: each a legal message.
    std::vector<float> values((state.size() + sizeof(float) - 1) / sizeof(float) + 2, 0.0f);
    const std::uint64_t bytes = state.size();
    std::memcpy(values.data(), &bytes, sizeof bytes);
    std::memcpy(values.data() + 2, state.data(), state.size());
    // (16 values fit under transport::largest_payload_bytes of any model.)
    const std::size_t piece = math_ ? std::max<std::size_t>(length_, 16) : values.size();
    for (int r : to)
        for (std::size_t at = 0; at < values.size(); at += piece) {
            Message msg;
            msg.kind = MessageKind::full_model;
            msg.receiver = r;
            msg.chunk = kSync;
            msg.round = accepted_;
            msg.offset = at;
            msg.edge_seq = values.size();
            msg.sent_at = now_;
            const auto end = std::min(values.size(), at + piece);
            msg.payload.assign(values.begin() + static_cast<std::ptrdiff_t>(at),
                               values.begin() + static_cast<std::ptrdiff_t>(end));
            // Cost mode: the state is a step count, but a real one is a model and more.
            msg.elements = math_ ? msg.payload.size() : length_;
            send(out, std::move(msg));
        }
}

std::optional<Protocol::NonFinite> AllreduceProtocol::first_non_finite_value(
    const Message& msg, std::span<const float> values) const {
    // A sync piece is the state's bytes as bit copies, not values (its source checked its own
    // loss and gradients, which is where a non-finite model would show).
    if (msg.kind == MessageKind::full_model && msg.chunk == kSync) return std::nullopt;
    return Protocol::first_non_finite_value(msg, values);
}

void AllreduceProtocol::take_sync(Message& msg, Actions& out) {
    if (msg.round != accepted_ || !syncing_) return;  // a proposal overtaken by a later one
    const std::uint64_t total = msg.edge_seq;
    if (total < 2 || msg.offset >= total || msg.payload.size() > total - msg.offset)
        throw Error(fmt::format("allreduce: rank {} got a bad state piece from rank {}", rank(),
                                msg.sender));
    if (sync_key_ != msg.round || sync_in_.size() != total) {
        sync_key_ = msg.round;
        sync_in_.assign(total, 0.0f);
        sync_got_ = 0;
    }
    std::copy(msg.payload.begin(), msg.payload.end(),
              sync_in_.begin() + static_cast<std::ptrdiff_t>(msg.offset));
    sync_got_ += msg.payload.size();
    if (sync_got_ < total) return;
    std::uint64_t bytes = 0;
    std::memcpy(&bytes, sync_in_.data(), sizeof bytes);
    if (bytes > (total - 2) * sizeof(float))
        throw Error(fmt::format("allreduce: rank {} got a state of {} bytes in {} values", rank(),
                                bytes, total));
    std::vector<char> state(bytes);
    std::memcpy(state.data(), sync_in_.data() + 2, bytes);
    sync_in_.clear();
    sync_key_ = -1;
    adopt(state);
    if (options_.elastic == AllreduceOptions::Elastic::restart) {
        checkpoint_ = std::move(state);
        checkpoint_step_ = worker().steps();
    }
    install(accepted_, accepted_members_, out);
}

void AllreduceProtocol::adopt(std::span<const char> state) {
    StateReader r(fmt::format("the state rank {} was sent", rank()),
                  std::string_view(state.data(), state.size()));
    r.tag("allreduce sync");
    round_ = r.counter("allreduce round");
    worker().restore_state(r);
    r.finish();
}

void AllreduceProtocol::install(std::int64_t key, std::vector<int> ring, Actions& out) {
    key_ = key;
    for (int r : ring) {
        alive_[static_cast<std::size_t>(r)] = 1;
        joiners_.erase(r);
    }
    set_ring(std::move(ring));
    // The steps that count are those applied: a step whose all-reduce was abandoned is not.
    if (!done()) steps_finished_ = worker().steps();
    syncing_ = false;
    if (joining()) mark_admitted();
    if (done()) return announce_done(out);  // the source of a finished job: the new members
    if (steps_finished_ < context().max_steps) finished_.clear();
    for (auto it = pending_.begin(); it != pending_.end();)  // earlier rings' messages
        it = std::get<0>(it->first) < key_ ? pending_.erase(it) : std::next(it);
    for (const auto& [k, msg] : pending_)  // this ring's, sent before it was ours
        if (std::get<0>(k) == key_) check(msg);
    if (options_.elastic == AllreduceOptions::Elastic::restart && options_.restart_seconds > 0) {
        restarting_ = true;
        out.deadlines.push_back({now_ + options_.restart_seconds, 0});
        return;
    }
    next_step(out);
}

void AllreduceProtocol::on_deadline(Time now, std::uint64_t, Actions& out) {
    now_ = now;
    if (!restarting_ || syncing_) return;  // a later change came while it waited
    restarting_ = false;
    next_step(out);
}

void AllreduceProtocol::step_after_change(Actions& out) {
    // The step's gradient belongs to an abandoned all-reduce: the state comes from the source.
    if (leaving_) return leave_now(out);  // nothing of it is sent: leave now
    if (answer_after_step_) answer(out);
    if (want_propose_ && leader() == rank()) propose(out);
}

bool AllreduceProtocol::at_boundary(Actions& out) {
    if (leaving_) {
        leave_now(out);
        return true;
    }
    if (options_.elastic == AllreduceOptions::Elastic::restart &&
        steps_finished_ % options_.checkpoint_every == 0 && steps_finished_ > checkpoint_step_) {
        checkpoint_ = pack_state();
        checkpoint_step_ = steps_finished_;
    }
    if (want_propose_ && leader() == rank()) {
        propose(out);
        return true;
    }
    if (steps_finished_ >= context().max_steps) {
        out.done = true;
        announce_done(out);
        return true;
    }
    return false;
}

void AllreduceProtocol::announce_done(Actions& out) {
    finished_.insert(rank());
    for (int r : members_)
        if (r != rank() && alive_[static_cast<std::size_t>(r)]) send_control(out, r, kDone, key_);
}

void AllreduceProtocol::on_control(Time now, Message& msg, Actions& out) {
    now_ = now;
    const int from = msg.sender;
    if (from < 0 || from >= n() || from == rank())
        throw Error(fmt::format("allreduce: rank {} got a message from rank {}", rank(), from));
    if (msg.kind == MessageKind::full_model && msg.chunk == kSync) return take_sync(msg, out);
    if (msg.kind != MessageKind::control)
        throw Error(fmt::format("allreduce: rank {} got a {} message from rank {}", rank(),
                                transport::to_string(msg.kind), from));
    std::vector<int> ranks;
    for (float v : msg.payload) {
        const auto r = static_cast<int>(v);
        if (!(v >= 0) || r >= n() || static_cast<float>(r) != v)
            throw Error(
                fmt::format("allreduce: rank {} got a bad rank list from rank {}", rank(), from));
        ranks.push_back(r);
    }
    const std::int64_t key = msg.round;
    switch (msg.chunk) {
        case kJoin: {
            if (leaving_) return;
            // A member restarted: its old process is gone, and the running all-reduce with it.
            const bool restarted = in_ring(from) && alive_[static_cast<std::size_t>(from)];
            alive_[static_cast<std::size_t>(from)] = 1;
            joiners_.insert(from);
            if (restarted && !done()) abort_round();
            if (leader() == rank()) {
                want_propose_ = true;  // at the next round boundary (now, if between rounds)
                if (!stepping() && (syncing_ || done() || !active_)) propose(out);
            }
            return;
        }
        case kPropose:
            max_epoch_ = std::max(max_epoch_, key / n());
            if (leaving_ && !done()) {  // the ring changes before it could leave at its boundary
                abort_round();
                if (!stepping()) leave_now(out);
                return;
            }
            if (key <= accepted_ || std::find(ranks.begin(), ranks.end(), rank()) == ranks.end())
                return;
            accepted_ = key;
            accepted_members_ = ranks;
            proposal_ = Proposal{};
            for (int r : members_)  // the proposer's view: members it left out are gone
                alive_[static_cast<std::size_t>(r)] = 0;
            for (int r : ranks) {
                alive_[static_cast<std::size_t>(r)] = 1;
                joiners_.erase(r);
            }
            if (!done()) abort_round();
            want_propose_ = false;
            if (stepping())
                answer_after_step_ = true;
            else
                answer(out);
            return;
        case kReady:
            if (key != proposal_.key) return;
            proposal_.ready[from] = static_cast<std::int64_t>(msg.offset) - 1;
            return maybe_choose_source(out);
        case kSource:
            if (key != accepted_) return;
            send_sync(without(ranks, rank()), out);
            return install(key, accepted_members_, out);
        case kLeaving:
            return lost(now, from, out);
        case kDone:
            finished_.insert(from);
            return;
        default:
            throw Error(fmt::format("allreduce: rank {} got control code {} from rank {}", rank(),
                                    msg.chunk, from));
    }
}

bool AllreduceProtocol::settled() const {
    if (!done()) return false;
    if (!elastic() || leaving_) return true;
    if (proposal_.key >= 0 || syncing_ || !joiners_.empty()) return false;
    return std::all_of(members_.begin(), members_.end(), [&](int r) {
        return !alive_[static_cast<std::size_t>(r)] || finished_.count(r);
    });
}

std::vector<int> AllreduceProtocol::settling_on() const {
    std::vector<int> waiting;
    for (int r : members_)
        if (alive_[static_cast<std::size_t>(r)] && !finished_.count(r)) waiting.push_back(r);
    return waiting;
}

}  // namespace gossamer::proto
