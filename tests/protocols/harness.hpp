#pragma once
/// A deterministic single-threaded driver for protocol tests: N protocol objects, their workers
/// and an in-memory network in one thread (STYLE.md: UCC runs 16 contexts in one thread).
///
/// The harness owns the workers and the protocols (built by a factory from a PeerContext), keeps
/// one queue of pending events (steps running, messages in flight, send completions, deadlines)
/// and delivers them one at a time on a logical clock that advances by 1 per event:
///  - start_step: the step is queued; when it is delivered the harness computes
///    worker.compute_gradient(protocol.compute_point()) and calls step_finished with the loss;
///  - sends: the message is queued on its (sender, receiver) channel; delivering it calls
///    message_arrived on the receiver, then send_completed(ok = true) on the sender;
///  - deadlines: delivered once the clock reaches them (the clock jumps there when nothing else
///    is pending);
///  - fail(rank): the rank gets no more events, messages to it are dropped (their senders get
///    send_completed(ok = false)), and every other live peer gets peer_failed(rank).
/// Order: FIFO by default; with `shuffle` a seeded random choice among every pending event,
/// except that each (sender, receiver) channel stays FIFO (unless fifo_channels is off).
///
/// Checks (each throws std::logic_error): a message's sender is the peer that sent it, its
/// receiver another valid rank, its payload empty or `elements` long; edge_seq counts 0, 1, ...
/// on every directed edge (check_edge_seq); compute_point() did not change while the step ran
/// (the ownership rule, checked in every build type).
///
/// With zero_copy, the harness acts as a zero-copy driver (Protocol::enable_zero_copy): a
/// borrowed send is read when it is sent, and its memory must be unchanged when its completion
/// is delivered; a message's payload is placed where the receiver's receive_into() says at the
/// moment it is sent (the earliest a transport could write it).

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "gossamer/optimizers/protocol/protocol.hpp"

namespace gossamer::testing {

struct HarnessOptions {
    std::int64_t max_steps = 1;                            ///< PeerContext::max_steps
    std::shared_ptr<const topology::Schedule> topology{};  ///< PeerContext::topology
    bool shuffle = false;                                  ///< random order (per-pair FIFO)
    bool fifo_channels = true;  ///< false (with shuffle): any message may overtake any other
    std::uint64_t seed = 1;     ///< for shuffle
    bool check_edge_seq = true;
    bool log_payloads = true;              ///< keep payloads in sent() (off for big models)
    std::int64_t max_events = 10'000'000;  ///< run() throws past this (a protocol loops)
    bool zero_copy = false;                ///< act as a zero-copy driver (see above)
};

using ProtocolFactory = std::function<std::unique_ptr<proto::Protocol>(proto::PeerContext)>;

class Harness {
  public:
    Harness(std::vector<std::unique_ptr<proto::LocalWorker>> workers, const ProtocolFactory& make,
            HarnessOptions options = {})
        : options_(std::move(options)), workers_(std::move(workers)), rng_(options_.seed) {
        const int n = size();
        for (int r = 0; r < n; ++r) {
            proto::PeerContext ctx;
            ctx.rank = r;
            ctx.n = n;
            ctx.topology = options_.topology;
            ctx.worker = workers_[static_cast<std::size_t>(r)].get();
            ctx.max_steps = options_.max_steps;
            protocols_.push_back(make(ctx));
            if (options_.zero_copy) protocols_.back()->enable_zero_copy();
        }
        alive_.assign(static_cast<std::size_t>(n), true);
        steps_started_.assign(static_cast<std::size_t>(n), 0);
        losses_.resize(static_cast<std::size_t>(n));
        points_.resize(static_cast<std::size_t>(n));
    }

    /// Called when peer `rank` is asked to start its step number `step` (0-based), before the
    /// step runs: the protocol's model is what its previous step and communication left.
    std::function<void(int rank, std::int64_t step)> on_step_start;
    /// Called with every message after its sender's protocol let it go and before it is queued:
    /// a test's stand-in for a faulty link or a peer that checks nothing it sends.
    std::function<void(proto::Message&)> tamper;

    /// Starts every peer (first call only), then delivers events until every live peer is done,
    /// nothing is pending, or `stop()` (checked before each event) says so. Returns true when
    /// every live peer is done. Can be called again to continue.
    bool run(const std::function<bool()>& stop = {}) {
        if (!started_) {
            started_ = true;
            for (int r = 0; r < size(); ++r) {
                proto::Actions out;
                protocols_[idx(r)]->start(now_, out);
                apply(r, out);
            }
        }
        while (!(stop && stop())) {
            if (!deliver_one()) break;
        }
        return all_done();
    }

    /// Kills `rank` now (see the header comment).
    void fail(int rank) {
        alive_[idx(rank)] = false;
        std::vector<Event> refused;
        for (auto it = queue_.begin(); it != queue_.end();) {
            const Event& e = it->second;
            if (e.rank != rank) {
                ++it;
                continue;
            }
            if (e.type == Event::message && alive_[idx(e.from)])
                refused.push_back(completion(e.from, e.id, false));
            it = queue_.erase(it);
        }
        for (auto& e : refused) push(std::move(e));
        for (int r = 0; r < size(); ++r) {
            if (!alive_[idx(r)]) continue;
            proto::Actions out;
            protocols_[idx(r)]->peer_failed(now_, rank, out);
            apply(r, out);
        }
    }

    int size() const { return static_cast<int>(workers_.size()); }
    proto::Protocol& protocol(int r) { return *protocols_[idx(r)]; }
    /// The protocol of rank r as its concrete type.
    template <class P>
    P& as(int r) {
        return dynamic_cast<P&>(*protocols_[idx(r)]);
    }
    proto::LocalWorker& worker(int r) { return *workers_[idx(r)]; }
    bool alive(int r) const { return alive_[idx(r)]; }
    bool all_done() const {
        for (int r = 0; r < size(); ++r)
            if (alive_[idx(r)] && !protocols_[idx(r)]->done()) return false;
        return true;
    }
    /// The model rank r reports now (current_model).
    std::vector<float> model(int r) const {
        std::vector<float> x(workers_[idx(r)]->size());
        protocols_[idx(r)]->current_model(x);
        return x;
    }

    proto::Time now() const { return now_; }
    std::int64_t events() const { return events_; }
    /// Every message sent so far, in send order (payloads cleared unless log_payloads).
    const std::vector<proto::Message>& sent() const { return sent_; }
    std::int64_t steps_started(int r) const { return steps_started_[idx(r)]; }
    /// Losses of rank r's finished steps, in order.
    const std::vector<double>& losses(int r) const { return losses_[idx(r)]; }
    /// Messages delivered to a peer while its step was running.
    std::int64_t delivered_while_stepping() const { return early_; }
    /// zero_copy: sends that read the protocol's memory, and messages placed by receive_into.
    std::int64_t borrowed_sends() const { return borrowed_sends_; }
    std::int64_t placed_messages() const { return placed_; }

  private:
    struct Event {
        enum Type { step, message, completed, deadline } type = step;
        std::uint64_t seq = 0;
        int rank = 0;  // who receives the event
        int from = 0;  // message: the sender
        proto::Message msg{};
        std::uint64_t id = 0;  // send or deadline id
        bool ok = true;
        proto::Time at = 0;  // deadline
    };

    static std::size_t idx(int r) { return static_cast<std::size_t>(r); }

    Event completion(int rank, std::uint64_t id, bool ok) {
        Event e;
        e.type = Event::completed;
        e.seq = next_seq_++;
        e.rank = rank;
        e.id = id;
        e.ok = ok;
        return e;
    }

    void push(Event e) {
        const std::uint64_t seq = e.seq;
        queue_.emplace(seq, std::move(e));
    }

    void apply(int r, proto::Actions& out) {
        for (auto& s : out.sends) send(r, std::move(s));
        for (const auto& d : out.deadlines) {
            Event e;
            e.type = Event::deadline;
            e.seq = next_seq_++;
            e.rank = r;
            e.id = d.id;
            e.at = d.at;
            push(std::move(e));
        }
        if (out.start_step) {
            const std::int64_t step = steps_started_[idx(r)]++;
            if (on_step_start) on_step_start(r, step);
            auto point = protocols_[idx(r)]->compute_point();
            points_[idx(r)].assign(point.begin(), point.end());
            Event e;
            e.type = Event::step;
            e.seq = next_seq_++;
            e.rank = r;
            push(std::move(e));
        }
    }

    void send(int r, proto::Send s) {
        const proto::Message& m = s.msg;
        if (m.sender != r)
            fail_check("message sender " + std::to_string(m.sender) + " from rank " +
                       std::to_string(r));
        if (m.receiver < 0 || m.receiver >= size() || m.receiver == r)
            fail_check("rank " + std::to_string(r) + " sent to rank " + std::to_string(m.receiver));
        if (!m.payload.empty() && m.payload.size() != m.elements)
            fail_check("payload of " + std::to_string(m.payload.size()) + " values, elements " +
                       std::to_string(m.elements));
        auto& seq = edge_seq_[{r, m.receiver}];
        if (options_.check_edge_seq && m.edge_seq != seq)
            fail_check("edge " + std::to_string(r) + "->" + std::to_string(m.receiver) +
                       " sequence " + std::to_string(m.edge_seq) + ", expected " +
                       std::to_string(seq));
        ++seq;
        if (!s.borrowed.empty()) {
            if (!options_.zero_copy) fail_check("a borrowed send to a driver without zero-copy");
            if (!s.msg.payload.empty() || s.borrowed.size() != m.elements)
                fail_check("a borrowed send of " + std::to_string(s.borrowed.size()) +
                           " values, elements " + std::to_string(m.elements));
            ++borrowed_sends_;
            s.msg.payload.assign(s.borrowed.begin(), s.borrowed.end());  // read at once
            lent_[{r, s.id}] = {s.borrowed, s.msg.payload};
        }
        if (tamper) tamper(s.msg);
        if (options_.zero_copy && alive_[idx(m.receiver)] && !m.payload.empty()) {
            const auto place = protocols_[idx(m.receiver)]->receive_into(m);
            if (!place.empty()) {
                if (place.size() != m.elements)
                    fail_check("receive_into gave " + std::to_string(place.size()) +
                               " values for " + std::to_string(m.elements));
                sent_.push_back(m);  // logged with its values
                std::copy(m.payload.begin(), m.payload.end(), place.begin());
                s.msg.payload.clear();
                s.msg.placed = true;
                ++placed_;
            }
        }
        if (!s.msg.placed) sent_.push_back(m);
        if (!options_.log_payloads) sent_.back().payload = {};
        if (!alive_[idx(m.receiver)]) {
            push(completion(r, s.id, false));
            return;
        }
        Event e;
        e.type = Event::message;
        e.seq = next_seq_++;
        e.rank = m.receiver;
        e.from = r;
        e.id = s.id;
        e.msg = std::move(s.msg);
        push(std::move(e));
    }

    [[noreturn]] static void fail_check(const std::string& what) {
        throw std::logic_error("harness: " + what);
    }

    // The seqs of the events that may go next, oldest first: not a message
    // behind an older one on its channel, not a deadline in the future. When only deadlines are
    // left the clock jumps to the earliest.
    std::vector<std::uint64_t> eligible() {
        const bool only_deadlines = std::all_of(queue_.begin(), queue_.end(), [](const auto& kv) {
            return kv.second.type == Event::deadline;
        });
        if (only_deadlines && !queue_.empty()) {
            proto::Time first = queue_.begin()->second.at;
            for (const auto& [seq, e] : queue_) first = std::min(first, e.at);
            now_ = std::max(now_, first - 1);  // deliver_one() advances the clock by 1 at least
        }
        std::vector<std::uint64_t> out;
        std::vector<char> behind(idx(size()) * idx(size()), 0);  // channel already has a head
        for (const auto& [seq, e] : queue_) {
            if (e.type == Event::message && options_.fifo_channels) {
                char& seen = behind[idx(e.from) * idx(size()) + idx(e.rank)];
                if (seen) continue;
                seen = 1;
            }
            if (e.type == Event::deadline && e.at > now_ + 1) continue;
            out.push_back(seq);
            if (!options_.shuffle && e.type != Event::deadline) break;  // FIFO: the oldest
        }
        return out;
    }

    bool deliver_one() {
        const auto candidates = eligible();
        if (candidates.empty()) return false;
        if (++events_ > options_.max_events) fail_check("too many events; a protocol loops");
        std::uint64_t pick = candidates.front();
        if (options_.shuffle) {
            std::uniform_int_distribution<std::size_t> u(0, candidates.size() - 1);
            pick = candidates[u(rng_)];
        }
        auto node = queue_.extract(pick);
        Event e = std::move(node.mapped());
        now_ = std::max(now_ + 1, e.type == Event::deadline ? e.at : now_);
        proto::Protocol& p = *protocols_[idx(e.rank)];
        proto::Actions out;
        switch (e.type) {
            case Event::step: {
                auto point = p.compute_point();
                if (!std::equal(point.begin(), point.end(), points_[idx(e.rank)].begin(),
                                points_[idx(e.rank)].end()))
                    fail_check("rank " + std::to_string(e.rank) +
                               "'s compute point changed while its step ran");
                const double loss = workers_[idx(e.rank)]->compute_gradient(point);
                losses_[idx(e.rank)].push_back(loss);
                p.step_finished(now_, loss, out);
                break;
            }
            case Event::message: {
                if (p.stepping()) ++early_;
                const int from = e.from;
                const std::uint64_t id = e.id;
                p.message_arrived(now_, std::move(e.msg), out);
                if (alive_[idx(from)]) push(completion(from, id, true));
                break;
            }
            case Event::completed:
                if (auto it = lent_.find({e.rank, e.id}); it != lent_.end()) {
                    const auto& [memory, values] = it->second;
                    if (!std::equal(memory.begin(), memory.end(), values.begin(), values.end()))
                        fail_check("rank " + std::to_string(e.rank) + " changed the memory of " +
                                   "send " + std::to_string(e.id) + " before it completed");
                    lent_.erase(it);
                }
                p.send_completed(now_, e.id, e.ok, out);
                break;
            case Event::deadline:
                p.deadline_reached(now_, e.id, out);
                break;
        }
        apply(e.rank, out);
        return true;
    }

    HarnessOptions options_;
    std::vector<std::unique_ptr<proto::LocalWorker>> workers_;
    std::vector<std::unique_ptr<proto::Protocol>> protocols_;
    std::vector<bool> alive_;
    std::vector<std::int64_t> steps_started_;
    std::vector<std::vector<double>> losses_;
    std::vector<std::vector<float>> points_;  // compute_point() copied at each start_step
    std::map<std::uint64_t, Event> queue_;    // pending events by seq (= age)
    std::map<std::pair<int, int>, std::uint64_t> edge_seq_;
    std::vector<proto::Message> sent_;
    // zero_copy: (rank, send id) -> the borrowed memory and the values it held when sent.
    std::map<std::pair<int, std::uint64_t>, std::pair<std::span<const float>, std::vector<float>>>
        lent_;
    std::int64_t borrowed_sends_ = 0, placed_ = 0;
    std::mt19937_64 rng_;
    proto::Time now_ = 0;
    std::uint64_t next_seq_ = 0;
    std::int64_t events_ = 0, early_ = 0;
    bool started_ = false;
};

}  // namespace gossamer::testing
