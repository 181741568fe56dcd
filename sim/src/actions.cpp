// What a peer's actions do in the simulator (Engine::apply, through the ActionApplier both
// drivers share): its sends travel the virtual network, a step computes its gradient at once and
// ends when the cluster file says, done counts the peer out (docs/modules/simulator.md).
#include <fmt/format.h>

#include <algorithm>
#include <bit>

#include "engine.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/core/log.hpp"

namespace gossamer::sim::detail {

proto::Actions& Engine::fresh_actions() {
    actions_.sends.clear();
    actions_.deadlines.clear();
    actions_.start_step = actions_.done = false;
    return actions_;
}

namespace {

// Rounds by time: the most inner steps the simulator plans for one round (a bound on the loop).
constexpr std::int64_t kMaxPlannedSteps = 1 << 20;

// Only header fields that a Notice keeps, and none of the others set (bit for bit): take()
// gives back the very Message.
bool notice(const transport::Message& m) {
    return m.payload.empty() && m.elements == 0 && std::bit_cast<std::uint64_t>(m.weight) == 0 &&
           std::bit_cast<std::uint64_t>(m.sent_at) == 0 && m.partition == 0 && m.offset == 0 &&
           m.codec == 0 && !m.placed;
}
}  // namespace

std::uint32_t Engine::hold(transport::Message&& m) {
    if (notice(m)) {
        const Notice n{m.round, m.edge_seq, m.sender, m.receiver, m.chunk, m.kind};
        if (free_notices_.empty()) {
            if (notices_.size() >= kNoticeIndex)
                throw Error("sim: more than 2^31 notices in flight at once");
            notices_.push_back(n);
            return static_cast<std::uint32_t>(notices_.size() - 1) | kNoticeIndex;
        }
        const std::uint32_t i = free_notices_.back();
        free_notices_.pop_back();
        notices_[i] = n;
        return i | kNoticeIndex;
    }
    if (messages_.size() >= kNoticeIndex && free_messages_.empty())
        throw Error("sim: more than 2^31 messages in flight at once");
    if (free_messages_.empty()) {
        messages_.push_back(std::move(m));
        return static_cast<std::uint32_t>(messages_.size() - 1);
    }
    const std::uint32_t i = free_messages_.back();
    free_messages_.pop_back();
    messages_[i] = std::move(m);
    return i;
}

transport::Message Engine::take(std::uint32_t index) {
    if (index & kNoticeIndex) {
        const std::uint32_t i = index & ~kNoticeIndex;
        const Notice& n = notices_[i];
        transport::Message m;
        m.kind = n.kind;
        m.sender = n.sender;
        m.receiver = n.receiver;
        m.edge_seq = n.edge_seq;
        m.round = n.round;
        m.chunk = n.chunk;
        free_notices_.push_back(i);
        return m;
    }
    transport::Message m = std::move(messages_[index]);
    messages_[index].payload = {};  // a moved-from vector's buffer is released either way
    free_messages_.push_back(index);
    return m;
}

void Engine::unsettle(Time now) {
    if (settle_queued_) return;
    settle_queued_ = true;
    ++pending_;
    queue_.push(now, Settle{});
}

void Engine::start_flow(const Flowing& f, Time now) {
    const std::uint32_t flow = fair_->start(f.rank, f.to, f.bytes, now);
    if (flowing_.size() <= flow) flowing_.resize(flow + 1);
    flowing_[flow] = f;
    unsettle(now);
}

void Engine::apply(int rank, Time now, proto::Actions& a) {
    Peer& p = peers_[static_cast<std::size_t>(rank)];
    struct Target final : proto::ActionTarget {
        Engine& e;
        Peer& p;
        int rank;
        Time now;
        Target(Engine& e, Peer& p, int rank, Time now) : e(e), p(p), rank(rank), now(now) {}
        void refused(const proto::Refusal& r) override { e.refused(rank, now, r); }
        void send(proto::Send& s, bool counted) override { e.send(rank, now, s, counted); }
        void deadline(Time at, std::uint64_t id) override {
            ++e.pending_;
            e.queue_.push(at, DeadlineEvent{rank, id, p.life});
        }
        void start_step() override { e.start_step(rank, now); }
        void done() override { e.peer_done(rank, now); }
    } target(*this, p, rank, now);
    p.applier.apply(*p.protocol, now, a, target);
}

void Engine::refused(int rank, Time now, const proto::Refusal& r) {
    trace_.peer_failed(rank, now, r.sender);  // docs/operations/reliability.md, "Non-finite values"
    log::warn(
        "sim: peer {} refused a {} of peer {} (round {}) at {:.6f} s: {}; treating "
        "peer {} as failed",
        rank, transport::to_string(r.kind), r.sender, r.round, now, r.reason, r.sender);
}

void Engine::send(int rank, Time now, proto::Send& send, bool counted) {
    Peer& p = peers_[static_cast<std::size_t>(rank)];
    const int to = send.msg.receiver;
    if (fair_) {  // delivered when its flow ends (handle, FlowEnd)
        trace_.send(rank, now, send.msg);
        const std::uint64_t bytes = send.msg.wire_bytes();
        const Flowing f{rank,
                        to,
                        counted ? to : -1,
                        send.id,
                        hold(std::move(send.msg)),
                        p.life,
                        peers_[static_cast<std::size_t>(to)].life,
                        bytes};
        if (edge_lines_.push(edge_key(rank, to), f)) start_flow(f, now);  // else it waits
        return;
    }
    const Transfer tr = network_.transfer(rank, to, send.msg.wire_bytes(), now);
    ++pending_;
    queue_.push(tr.sent, SendDone{rank, counted ? to : -1, send.id, p.life});
    trace_.send(rank, now, send.msg);
    ++pending_;
    queue_.push(tr.arrival,
                Arrival{to, hold(std::move(send.msg)), peers_[static_cast<std::size_t>(to)].life});
}

void Engine::start_step(int rank, Time now) {
    Peer& p = peers_[static_cast<std::size_t>(rank)];
    if (!p.stepping) p.idle += now - p.idle_since;
    if (!p.stepping) trace_.wait(rank, p.idle_since, now);
    p.stepping = true;
    p.step_start = now;
    // Under "outer" one protocol step is a round: each of its inner steps costs a step. Rounds
    // by time take the steps that end within the round's seconds (at least one).
    const double seconds = p.worker->round_seconds();
    if (seconds > 0) {
        std::int64_t k = 1;  // the worker bounds k again (8 x reference_steps)
        for (Time t = compute_.step_end(rank, p.started, now); k < kMaxPlannedSteps; ++k) {
            const Time next = compute_.step_end(rank, p.started + k, t);
            if (next > now + seconds * (1 + 1e-9)) break;  // a step that ends at T fits
            t = next;
        }
        p.worker->plan_round(k);
    }
    const std::int64_t inner = p.worker->steps_per_gradient();
    if (p.inner) {  // the trace's round (rounds by time: the protocol's count)
        p.first_inner = p.worker->inner_steps();
        p.round = seconds > 0 ? p.worker->steps() : p.first_inner / outer_h_;
        p.inner_ends.clear();
    }
    const double loss =
        p.worker->math() || p.inner ? p.worker->compute_gradient(p.protocol->compute_point()) : 0.0;
    p.round_steps = inner;
    Time end = now;
    for (std::int64_t k = 0; k < inner; ++k) {
        end = compute_.step_end(rank, p.started++, end);
        if (p.inner && trace_.on()) p.inner_ends.push_back(end);
    }
    p.busy += end - now;
    p.step_end = end;
    if (p.protocol->takes_partition_ready()) schedule_ready(rank, now, end);
    ++pending_;
    queue_.push(end, StepDone{rank, loss, p.life});
}

void Engine::peer_done(int rank, Time now) {
    Peer& p = peers_[static_cast<std::size_t>(rank)];
    judge_pending(rank, now);          // its final model
    if (p.left) note_membership(now);  // a graceful leave is over
    if (p.alive) --active_;
    if (!p.stepping) p.idle += now - p.idle_since;
    if (!p.stepping) trace_.wait(rank, p.idle_since, now, {trace::WaitCause::finish});
    result_.end_time = std::max(result_.end_time, now);
}

void Engine::schedule_ready(int rank, Time start, Time end) {
    // Partition p is final at its point of the backward pass (backward_ready_fractions: a third
    // of forward, then the partitions in reverse order by their share of the values); partition
    // 0 at the end, which step_finished says.
    const Peer& p = peers_[static_cast<std::size_t>(rank)];
    const PartitionLayout* parts = p.worker->partitions();
    if (!parts || parts->count() < 2) return;
    const auto f = proto::backward_ready_fractions(*parts, p.worker->size());
    for (std::size_t id = parts->count() - 1; id >= 1; --id) {
        ++pending_;
        queue_.push(start + (end - start) * f[id],
                    PartitionReady{rank, static_cast<std::uint32_t>(id), p.started - 1, p.life});
    }
}

}  // namespace gossamer::sim::detail
