// Elastic jobs in the simulator (docs/operations/elastic.md): peers join late (join_at), leave
// gracefully (leave_at) and come back after a crash (rejoin_at), running the protocols' own join
// and leave (Protocol::join, Protocol::leave). The simulator plays the agreed membership view: a
// peer that starts or enters is told which ranks are not live members then (Protocol::peer_absent).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "engine.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocol/registry.hpp"
#include "gossamer/topology/live.hpp"

namespace gossamer::sim::detail {

std::unique_ptr<proto::Protocol> Engine::make(int rank) {
    Peer& p = peers_[static_cast<std::size_t>(rank)];
    // Non-owning: the setup's cluster outlives the run.
    proto::PeerContext ctx{
        rank,        n_,
        s_.topology, p.worker.get(),
        steps_,      std::shared_ptr<const Cluster>(std::shared_ptr<void>(), s_.cluster)};
    if (s_.config) ctx.value_bound = s_.config->value_bound;  // docs/operations/reliability.md
    return s_.protocol_factory
               ? s_.protocol_factory(ctx)
               : proto::make_protocol(s_.algorithm, s_.options ? &*s_.options : nullptr, ctx);
}

bool Engine::live(int rank, int life) const {
    const Peer& p = peers_[static_cast<std::size_t>(rank)];
    return p.alive && p.life == life;
}

void Engine::schedule_churn() {
    starters_ = n_;
    // Topology versions are recorded when the membership can change: churn or failures.
    track_versions_ = s_.cluster->has_churn();
    for (const PeerSpec& spec : s_.cluster->peers)
        if (std::isfinite(spec.fail_at)) track_versions_ = true;
    for (int r = 0; r < n_; ++r) {
        Peer& p = peers_[static_cast<std::size_t>(r)];
        const PeerSpec& spec = s_.cluster->peers[static_cast<std::size_t>(r)];
        if (spec.join_at > 0) {
            p.alive = false;  // absent until its Join
            any_absent_ = true;
            --active_;
            --starters_;
            ++pending_;
            queue_.push(spec.join_at, Join{r});
        }
        if (std::isfinite(spec.rejoin_at)) {
            ++pending_;
            queue_.push(spec.rejoin_at, Join{r});
        }
        if (std::isfinite(spec.leave_at)) {
            ++pending_;
            queue_.push(spec.leave_at, Leave{r});
        }
    }
}

void Engine::note_membership(Time now) {
    if (!track_versions_) return;
    std::vector<int> live;
    for (int r = 0; r < n_; ++r) {
        const Peer& q = peers_[static_cast<std::size_t>(r)];
        if (q.alive && !(q.left && q.applier.done())) live.push_back(r);
    }
    auto& versions = result_.topology_versions;
    if (live.empty() || (!versions.empty() && versions.back().live == live)) return;
    sim::TopologyVersion v;
    v.version = static_cast<int>(versions.size());
    v.time = now;
    v.live = live;
    // The analysis of a large graph takes longer than a log line may (dense spectrum).
    constexpr int kMaxAnalysed = 512;
    if (n_ <= kMaxAnalysed) {
        const auto report = topology::analyse_live(*s_.topology, live);
        v.spectral_gap = report.spectral_gap;
        v.connected = report.strongly_connected;
        v.line = topology::describe_live(report, live, n_, v.version);
    } else {
        v.line =
            fmt::format("topology version {}: {} of {} peers live (not analysed above {} peers)",
                        v.version, live.size(), n_, kMaxAnalysed);
    }
    versions.push_back(std::move(v));
}

void Engine::tell_absent(int rank) {
    if (!any_absent_) return;  // every peer present: O(1), not O(n) per peer at the start
    proto::Protocol& proto = *peers_[static_cast<std::size_t>(rank)].protocol;
    for (int r = 0; r < n_; ++r) {
        const Peer& q = peers_[static_cast<std::size_t>(r)];
        // Down, not joined yet, or gone after a graceful leave.
        if (r != rank && (!q.alive || (q.left && q.applier.done()))) proto.peer_absent(r);
    }
}

void Engine::crash(int rank) {
    Peer& p = peers_[static_cast<std::size_t>(rank)];
    crash_loss_ += p.protocol->held_mass();
    p.crashed = true;
    p.eval_pending = -1;  // a crashed peer's queued evaluation is lost with it
    // The model it comes back with at rejoin_at: the simulator keeps no checkpoints, so it is
    // the one it had at the crash (docs/operations/elastic.md).
    if (p.worker->math() && !p.protocol->joining()) {
        p.crash_model.resize(p.worker->size());
        p.protocol->current_model(p.crash_model);
    }
}

void Engine::drop(const transport::Message& m) {
    if (m.kind == transport::MessageKind::mass_share ||
        m.kind == transport::MessageKind::full_model)
        crash_loss_ += m.weight;
}

void Engine::join(int rank, Time now) {
    Peer& p = peers_[static_cast<std::size_t>(rank)];
    if (p.alive) return;
    const bool rejoin = p.crashed;
    if (rejoin) {
        // A new incarnation (a restarted process) on the same worker: the model it had at the
        // crash, a fresh protocol; what the old one started or was sent is dropped (life).
        const auto& st = p.protocol->stats();
        p.past_sent += st.bytes_sent;
        p.past_received += st.bytes_received;
        p.past_messages += st.messages_sent;
        if (!p.crash_model.empty())
            std::copy(p.crash_model.begin(), p.crash_model.end(), p.worker->params().begin());
        p.protocol = make(rank);
        p.protocol->configure_edge_speeds(speeds_for(rank));
        ++p.life;
        p.crashed = false;
    }
    tell_absent(rank);
    p.alive = true;
    p.applier.reset();  // not done, nothing in flight (a fresh joiner never sent)
    p.stepping = false;
    p.idle_since = now;
    ++p.joins;
    ++active_;
    note_membership(now);
    proto::Actions& a = fresh_actions();
    p.protocol->join(now, rejoin ? proto::Entry::rejoin : proto::Entry::fresh, a);
    apply(rank, now, a);
}

void Engine::leave(int rank, Time now) {
    Peer& p = peers_[static_cast<std::size_t>(rank)];
    if (!p.alive || p.applier.done()) return;  // down, or finished before its leave_at
    p.left = true;
    any_absent_ = true;
    p.eval_pending = -1;  // it hands its model on: nothing of its own to judge
    proto::Actions& a = fresh_actions();
    p.protocol->leave(now, a);
    apply(rank, now, a);
}

}  // namespace gossamer::sim::detail
