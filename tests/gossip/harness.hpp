#pragma once
// A small deterministic single-threaded driver for gossip protocols: N peers, a virtual clock,
// one event queue. A step takes step_time (plus seeded jitter); the gradient is computed at the
// step's end at compute_point(), after checking that neither the compute point nor x changed
// while the step ran (the ownership rule, checked in release builds too). Messages take
// `delay` plus seeded jitter; with `fifo` each (sender, receiver) pair keeps its order. Tests
// can drop or hold back chosen messages, kill peers, and check invariants after every event.
// Every send completes (send_completed, ok unless its receiver is dead) when its message
// arrives, or would have arrived when dropped.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "gossamer/core/rng.hpp"
#include "gossamer/optimizers/protocol/device.hpp"
#include "gossamer/optimizers/protocol/protocol.hpp"

namespace gossip_test {

using gossamer::proto::Actions;
using gossamer::proto::LocalWorker;
using gossamer::proto::Message;
using gossamer::proto::Protocol;

/// A host copy of v, which is device memory when the worker has a device.
inline std::vector<float> host_copy(const LocalWorker& w, std::span<const float> v) {
    std::vector<float> out(v.size());
    if (w.device()) {
        w.device()->download(out, v.data());
    } else {
        std::copy(v.begin(), v.end(), out.begin());
    }
    return out;
}

struct HarnessOptions {
    double step_time = 1.0;
    double step_jitter = 0.0;  ///< extra uniform [0, step_jitter) per step
    double delay = 0.1;
    double delay_jitter = 0.0;     ///< extra uniform [0, delay_jitter) per message
    bool fifo = true;              ///< keep each pair's order
    double failure_notice = 0.05;  ///< from a death to peer_failed at the others
    std::uint64_t seed = 1;
};

class Harness {
  public:
    Harness(std::vector<Protocol*> peers, std::vector<LocalWorker*> workers,
            HarnessOptions options = {})
        : peers_(std::move(peers)),
          workers_(std::move(workers)),
          options_(options),
          rng_(options.seed),
          alive_(peers_.size(), true),
          stepping_(peers_.size()) {}

    /// True: the message is lost (never delivered).
    std::function<bool(const Message&)> drop;
    /// Extra delay for one message, applied after the pair order is fixed (so it can overtake).
    std::function<double(const Message&)> hold;
    /// Called for every message a protocol sends (before a drop).
    std::function<void(const Message&)> on_send;
    /// Called after every event.
    std::function<void()> after_event;

    /// Peer `rank` dies at `at`; the others hear of it failure_notice later.
    void kill(int rank, double at) { push(at, Kind::kill, rank, 0, {}); }

    /// Runs until the queue is empty. True when every live peer is done.
    bool run(std::int64_t max_events = 5'000'000) {
        for (std::size_t p = 0; p < peers_.size(); ++p) {
            Actions out;
            peers_[p]->start(now_, out);
            apply(static_cast<int>(p), std::move(out));
        }
        for (std::int64_t e = 0; e < max_events && !queue_.empty(); ++e) {
            auto node = queue_.extract(queue_.begin());
            now_ = node.key().first;
            dispatch(node.mapped());
            if (after_event) after_event();
        }
        if (!queue_.empty()) throw std::runtime_error("harness: event limit reached");
        for (std::size_t p = 0; p < peers_.size(); ++p)
            if (alive_[p] && !peers_[p]->done()) return false;
        return true;
    }

    double now() const { return now_; }
    bool alive(int rank) const { return alive_[static_cast<std::size_t>(rank)]; }
    /// Messages sent and not yet delivered (nor dropped).
    std::vector<const Message*> in_flight() const {
        std::vector<const Message*> v;
        for (const auto& [key, ev] : queue_)
            if (ev.kind == Kind::deliver) v.push_back(&ev.msg);
        return v;
    }
    /// Messages that reached a dead peer (their mass is gone).
    const std::vector<Message>& undeliverable() const { return undeliverable_; }
    std::uint64_t dropped() const { return dropped_; }

  private:
    enum class Kind { step_done, deliver, deadline, kill, notice, completed };
    struct Event {
        Kind kind;
        int rank;  // the peer the event is for
        std::uint64_t id;
        Message msg;
    };
    struct Snapshot {
        std::vector<float> point, x;
    };

    void push(double at, Kind kind, int rank, std::uint64_t id, Message msg) {
        queue_.emplace(std::make_pair(at, seq_++), Event{kind, rank, id, std::move(msg)});
    }

    void dispatch(Event& ev) {
        const auto p = static_cast<std::size_t>(ev.rank);
        Actions out;
        switch (ev.kind) {
            case Kind::kill:
                alive_[p] = false;
                for (std::size_t q = 0; q < peers_.size(); ++q)
                    if (q != p)
                        push(now_ + options_.failure_notice, Kind::notice, static_cast<int>(q), p,
                             {});
                return;
            case Kind::notice:
                if (!alive_[p]) return;
                peers_[p]->peer_failed(now_, static_cast<int>(ev.id), out);
                break;
            case Kind::deadline:
                if (!alive_[p]) return;
                peers_[p]->deadline_reached(now_, ev.id, out);
                break;
            case Kind::completed:  // the transport took the message (a drop looks the same)
                if (!alive_[p]) return;
                peers_[p]->send_completed(now_, ev.id,
                                          alive_[static_cast<std::size_t>(ev.msg.receiver)], out);
                break;
            case Kind::deliver:
                if (!alive_[p]) {
                    undeliverable_.push_back(std::move(ev.msg));
                    return;
                }
                peers_[p]->message_arrived(now_, std::move(ev.msg), out);
                break;
            case Kind::step_done: {
                if (!alive_[p]) return;
                Protocol& peer = *peers_[p];
                LocalWorker& w = *workers_[p];
                if (w.math()) {
                    const Snapshot& s = stepping_[p];
                    if (host_copy(w, peer.compute_point()) != s.point ||
                        host_copy(w, w.params()) != s.x)
                        throw std::logic_error("peer " + std::to_string(p) +
                                               " changed its parameters during a step");
                }
                const double loss = w.compute_gradient(peer.compute_point());
                peer.step_finished(now_, loss, out);
                break;
            }
        }
        apply(ev.rank, std::move(out));
    }

    void apply(int rank, Actions out) {
        const auto p = static_cast<std::size_t>(rank);
        for (auto& send : out.sends) {
            Message& m = send.msg;
            if (m.sender != rank) throw std::logic_error("a message with the wrong sender");
            if (m.receiver < 0 || m.receiver >= static_cast<int>(peers_.size()) ||
                m.receiver == rank)
                throw std::logic_error("a message to an invalid receiver");
            if (on_send) on_send(m);
            // Every send completes when its message would arrive, dropped or not, as the
            // simulator's and the real drivers' do (dpsgd and choco judge re-syncs by it).
            Message receipt;
            receipt.receiver = m.receiver;
            if (drop && drop(m)) {
                ++dropped_;
                push(now_ + options_.delay, Kind::completed, rank, send.id, std::move(receipt));
                continue;
            }
            double at = now_ + options_.delay + options_.delay_jitter * rng_.uniform();
            if (options_.fifo) {
                double& last = last_delivery_[{m.sender, m.receiver}];
                at = std::max(at, last);
                last = at;
            }
            if (hold) at += hold(m);
            const int to = m.receiver;
            push(at, Kind::completed, rank, send.id, std::move(receipt));
            push(at, Kind::deliver, to, 0, std::move(m));
        }
        for (const auto& d : out.deadlines)
            push(std::max(d.at, now_), Kind::deadline, rank, d.id, {});
        if (out.start_step) {
            if (workers_[p]->math()) {
                stepping_[p].point = host_copy(*workers_[p], peers_[p]->compute_point());
                stepping_[p].x = host_copy(*workers_[p], workers_[p]->params());
            }
            const double t = options_.step_time + options_.step_jitter * rng_.uniform();
            push(now_ + t, Kind::step_done, rank, 0, {});
        }
    }

    std::vector<Protocol*> peers_;
    std::vector<LocalWorker*> workers_;
    HarnessOptions options_;
    gossamer::Rng rng_;
    std::vector<bool> alive_;
    std::vector<Snapshot> stepping_;
    std::map<std::pair<double, std::uint64_t>, Event> queue_;
    std::map<std::pair<int, int>, double> last_delivery_;
    std::vector<Message> undeliverable_;
    std::uint64_t seq_ = 0, dropped_ = 0;
    double now_ = 0.0;
};

}  // namespace gossip_test
