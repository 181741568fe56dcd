#include "gossamer/peer/join.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "gossamer/bootstrap/launcher.hpp"

namespace gossamer::peer {

// What the bootstrap thread's callback reaches. It outlives neither side's use: the transport
// pointer is cleared (under the lock) before the transport goes, so a late loss only queues.
struct JoinedPeer::Relay {
    std::mutex mu;
    transport::Transport* transport = nullptr;  // for wake() only; null once it is gone
    std::deque<bootstrap::PeerLoss> pending;    // vanished peers not yet failed in the transport
    std::vector<int> vanished;
    std::map<int, std::string> causes;  // why each vanished peer is gone, as the bootstrap saw it
    std::deque<std::pair<int, bootstrap::Blob>> joining;  // joined, not yet readmitted
    std::vector<int> joined;                              // readmitted, not yet taken

    void joins(int rank, const bootstrap::Blob& blob) {
        std::lock_guard lock(mu);
        joining.emplace_back(rank, blob);
        causes.erase(rank);
        if (transport) transport->wake();
    }

    void lost(const bootstrap::PeerLoss& loss) {
        if (loss.left) return;  // a goodbye: the peer finished, it did not fail
        std::lock_guard lock(mu);
        pending.push_back(loss);
        vanished.push_back(loss.rank);
        causes.emplace(loss.rank, loss.reason);
        if (transport) transport->wake();  // thread-safe; the loop then calls apply_peer_losses
    }

    // For the transport: UCX's endpoint errors say "Endpoint timeout" whether a peer was killed
    // or hangs; the bootstrap watched the process's own connection and knows which.
    std::optional<std::string> cause_of(int rank) {
        std::lock_guard lock(mu);
        auto it = causes.find(rank);
        if (it == causes.end()) return std::nullopt;
        return it->second;
    }
};

JoinedPeer::~JoinedPeer() {
    if (relay_) {
        std::lock_guard lock(relay_->mu);
        relay_->transport = nullptr;
    }
    transport_.reset();  // closes the endpoints first ...
    bootstrap_.reset();  // ... then the goodbye, so the others see this peer leave, not vanish
}

void JoinedPeer::abandon() {
    if (!bootstrap_) return;
    // Stay reachable for a moment first: a loss notice this peer's bootstrap is forwarding (the
    // failure that made it stop) then reaches the others before they see this peer go, so they
    // name the root cause instead of this peer.
    transport::progress_until(
        *transport_, [this] { return apply_peer_losses(), false; }, kAbandonLinger);
    losses_ = bootstrap_->lost_peers();
    bootstrap_->inject_fault(bootstrap::Fault::crash);  // sockets closed, no goodbye
    {
        std::lock_guard lock(relay_->mu);
        relay_->transport = nullptr;
    }
    transport_.reset();
    bootstrap_.reset();
}

int JoinedPeer::rank() const noexcept {
    return rank_;
}

int JoinedPeer::size() const noexcept {
    return size_;
}

std::size_t JoinedPeer::apply_peer_losses() {
    if (!transport_) return 0;
    std::deque<bootstrap::PeerLoss> todo;
    std::deque<std::pair<int, bootstrap::Blob>> back;
    {
        std::lock_guard lock(relay_->mu);
        if (relay_->pending.empty() && relay_->joining.empty()) return 0;
        todo.swap(relay_->pending);
        back.swap(relay_->joining);
    }
    // Losses before joins: a peer lost and back again ends up readmitted.
    for (auto& [r, blob] : back) {
        if (r < 0 || r >= size() || r == rank()) continue;
        std::erase_if(todo, [r](const bootstrap::PeerLoss& l) { return l.rank == r; });
        try {
            transport_->readmit(r, blob);
        } catch (const std::exception& e) {
            transport_->fail_peer(
                r, fmt::format("peer {} joined again but cannot be reached: {}", r, e.what()));
            continue;
        }
        bootstrap_->readmitted(r);
        std::lock_guard lock(relay_->mu);
        std::erase(relay_->vanished, r);
    }
    std::size_t failed = 0;
    for (auto& loss : todo) {
        if (loss.rank < 0 || loss.rank >= size() || loss.rank == rank()) continue;
        if (transport_->peer_failed(loss.rank)) continue;
        transport_->fail_peer(loss.rank, std::move(loss.reason));
        ++failed;
    }
    return failed;
}

std::vector<bootstrap::PeerLoss> JoinedPeer::losses() const {
    return bootstrap_ ? bootstrap_->lost_peers() : losses_;
}

std::vector<int> JoinedPeer::vanished() const {
    std::lock_guard lock(relay_->mu);
    return relay_->vanished;
}

std::unique_ptr<JoinedPeer> join(JoinOptions options) {
    auto& b = options.bootstrap;
    auto& u = options.ucx;
    u.rank = b.rank;
    u.size = static_cast<int>(b.peers.size());
    // A count-only job knows no other peer's host before the rendezvous: the launcher says how
    // many share this host, else assume all of them (the safe side: block, never spin).
    if (std::any_of(b.peers.begin(), b.peers.end(), [](const auto& e) { return e.port == 0; }))
        u.local_peers = bootstrap::launcher_local_size().value_or(u.size);
    u.job_id = b.job_id;
    // Nothing longer than the model's largest message is received (or allocated).
    if (b.model_size > 0) u.max_payload_bytes = transport::largest_payload_bytes(b.model_size);
    std::unique_ptr<JoinedPeer> me(new JoinedPeer);
    me->relay_ = std::make_shared<JoinedPeer::Relay>();
    u.known_cause = [relay = std::weak_ptr<JoinedPeer::Relay>(me->relay_)](
                        int peer) -> std::optional<std::string> {
        auto r = relay.lock();
        return r ? r->cause_of(peer) : std::nullopt;
    };
    me->rank_ = u.rank;
    me->size_ = u.size;
    // The listener first: a port clash or a bad rank is reported before UCX starts.
    me->bootstrap_ = std::make_unique<bootstrap::Bootstrap>(b);
    // A failure only this transport saw (a send timeout on a cut edge) goes to rank 0, which
    // makes it one the job agrees on. The bootstrap outlives the transport (~JoinedPeer,
    // abandon()).
    u.on_own_failure = [boot = me->bootstrap_.get()](int peer, const std::string& why) {
        boot->report_failure(peer, why);
    };
    me->transport_ = transport::make_ucx_transport(u);
    me->bootstrap_->on_peer_lost(
        [relay = me->relay_](const bootstrap::PeerLoss& loss) { relay->lost(loss); });
    me->bootstrap_->on_peer_joined(
        [relay = me->relay_](int rank, const bootstrap::Blob& blob) { relay->joins(rank, blob); });
    const auto table = options.running ? me->bootstrap_->join(me->transport_->address())
                                       : me->bootstrap_->rendezvous(me->transport_->address());
    std::map<int, std::vector<std::byte>> addresses;
    const auto lost_before = me->bootstrap_->lost_peers();  // a joiner: ranks outside its view
    for (std::size_t r = 0; r < table.size(); ++r) {
        const bool lost = std::any_of(lost_before.begin(), lost_before.end(),
                                      [r](const auto& l) { return l.rank == static_cast<int>(r); });
        if (static_cast<int>(r) != b.rank && !lost) addresses[static_cast<int>(r)] = table[r];
    }
    me->transport_->connect(addresses);
    {
        std::lock_guard lock(me->relay_->mu);
        me->relay_->transport = me->transport_.get();
    }
    // A loss noticed between the rendezvous and now is already queued; the first
    // apply_peer_losses() hands it over.
    return me;
}

transport::Duration send_timeout(std::uint64_t parameters) {
    const double bytes = 4.0 * static_cast<double>(parameters);
    const double ms = 10'000.0 + 4.0 * bytes / 1e6 * 1000.0;
    return transport::Duration{static_cast<transport::Duration::rep>(ms)};
}

}  // namespace gossamer::peer
