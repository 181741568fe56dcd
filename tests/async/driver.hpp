#pragma once
// A minimal deterministic driver for the async protocol: N peers with their own step times
// (unequal rates), seeded random message delays (optionally reordered), deadlines, failures, and
// a hook after every event. It checks the ownership rule (x and the compute point unchanged
// while a step runs) and records whether a peer ever sat idle between steps.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

#include "gossamer/core/rng.hpp"
#include "gossamer/optimizers/protocol/protocol.hpp"

namespace async_test {

using gossamer::proto::Actions;
using gossamer::proto::LocalWorker;
using gossamer::proto::Message;
using gossamer::proto::Protocol;

struct DriverOptions {
    std::vector<double> step_time;  ///< per peer; missing entries take 1.0
    double step_jitter = 0.0;       ///< extra uniform [0, jitter) per step
    double delay = 0.1;
    double delay_jitter = 0.0;
    bool fifo = true;
    double failure_notice = 0.05;
    std::uint64_t seed = 1;
};

class Driver {
  public:
    Driver(std::vector<Protocol*> peers, std::vector<LocalWorker*> workers, DriverOptions o)
        : peers_(std::move(peers)), workers_(std::move(workers)), o_(std::move(o)), rng_(o_.seed) {
        alive_.assign(peers_.size(), true);
        snap_.resize(peers_.size());
        o_.step_time.resize(peers_.size(), 1.0);
    }

    std::function<void(const Message&)> on_send;
    /// When set, the duration of the step `rank` starts at `now` (overrides step_time).
    std::function<double(int rank, double now)> step_time_of;
    std::function<void()> after_event;

    void kill(int rank, double at) { push(at, Kind::kill, rank, 0, {}); }

    /// Runs until no event is left; true when every live peer is done.
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
        if (!queue_.empty()) throw std::runtime_error("driver: event limit reached");
        for (std::size_t p = 0; p < peers_.size(); ++p)
            if (alive_[p] && !peers_[p]->done()) return false;
        return true;
    }

    double now() const { return now_; }
    bool alive(int r) const { return alive_[static_cast<std::size_t>(r)]; }
    std::vector<const Message*> in_flight() const {
        std::vector<const Message*> v;
        for (const auto& [k, ev] : queue_)
            if (ev.kind == Kind::deliver && ev.msg.kind == gossamer::proto::MessageKind::mass_share)
                v.push_back(&ev.msg);
        return v;
    }
    const std::vector<Message>& undeliverable() const { return undeliverable_; }
    /// Step ends after which a peer that was not done did not start its next step at once.
    std::int64_t waits() const { return waits_; }
    std::int64_t deadlines() const { return deadlines_; }

  private:
    enum class Kind { step_done, deliver, deadline, kill, notice };
    struct Event {
        Kind kind;
        int rank;
        std::uint64_t id;
        Message msg;
    };

    void push(double at, Kind k, int r, std::uint64_t id, Message m) {
        queue_.emplace(std::make_pair(at, seq_++), Event{k, r, id, std::move(m)});
    }

    void dispatch(Event& ev) {
        const auto p = static_cast<std::size_t>(ev.rank);
        Actions out;
        switch (ev.kind) {
            case Kind::kill:
                alive_[p] = false;
                for (std::size_t q = 0; q < peers_.size(); ++q)
                    if (q != p) push(now_ + o_.failure_notice, Kind::notice, int(q), p, {});
                return;
            case Kind::notice:
                if (!alive_[p]) return;
                peers_[p]->peer_failed(now_, static_cast<int>(ev.id), out);
                break;
            case Kind::deadline:
                if (!alive_[p]) return;
                ++deadlines_;
                peers_[p]->deadline_reached(now_, ev.id, out);
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
                // The ownership rule: neither the compute point nor x changed during the step.
                if (workers_[p]->math() && (!same(peers_[p]->compute_point(), snap_[p].first) ||
                                            !same(workers_[p]->params(), snap_[p].second)))
                    throw std::logic_error("a peer changed its parameters during a step");
                const double loss = workers_[p]->compute_gradient(peers_[p]->compute_point());
                peers_[p]->step_finished(now_, loss, out);
                if (!out.start_step && !out.done) ++waits_;
                break;
            }
        }
        apply(ev.rank, std::move(out));
    }

    void apply(int rank, Actions out) {
        const auto p = static_cast<std::size_t>(rank);
        for (auto& s : out.sends) {
            Message& m = s.msg;
            if (m.sender != rank || m.receiver < 0 || m.receiver >= int(peers_.size()) ||
                m.receiver == rank)
                throw std::logic_error("a message with a bad sender or receiver");
            if (on_send) on_send(m);
            double at = now_ + o_.delay + o_.delay_jitter * rng_.uniform();
            if (o_.fifo) {
                double& last = last_[{m.sender, m.receiver}];
                at = std::max(at, last);
                last = at;
            }
            const int to = m.receiver;
            push(at, Kind::deliver, to, 0, std::move(m));
        }
        for (const auto& d : out.deadlines)
            push(std::max(d.at, now_), Kind::deadline, rank, d.id, {});
        if (out.start_step) {
            if (workers_[p]->math()) {
                const auto point = peers_[p]->compute_point();
                const auto x = workers_[p]->params();
                snap_[p].first.assign(point.begin(), point.end());
                snap_[p].second.assign(x.begin(), x.end());
            }
            const double t = step_time_of ? step_time_of(rank, now_) : o_.step_time[p];
            push(now_ + t + o_.step_jitter * rng_.uniform(), Kind::step_done, rank, 0, {});
        }
    }

    static bool same(std::span<const float> a, const std::vector<float>& b) {
        return std::equal(a.begin(), a.end(), b.begin(), b.end());
    }

    std::vector<Protocol*> peers_;
    std::vector<std::pair<std::vector<float>, std::vector<float>>> snap_;
    std::vector<LocalWorker*> workers_;
    DriverOptions o_;
    gossamer::Rng rng_;
    std::vector<bool> alive_;
    std::map<std::pair<double, std::uint64_t>, Event> queue_;
    std::map<std::pair<int, int>, double> last_;
    std::vector<Message> undeliverable_;
    std::uint64_t seq_ = 0;
    std::int64_t waits_ = 0, deadlines_ = 0;
    double now_ = 0.0;
};

}  // namespace async_test
