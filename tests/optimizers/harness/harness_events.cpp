// The protocol harness (harness.hpp): its events, in order, and the checks of the contract.
#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "gossamer/optimizers/protocol/device.hpp"
#include "optimizers/harness/harness.hpp"

namespace gossamer::testing {

namespace {

std::string str(std::int64_t v) {
    return std::to_string(v);
}

// Bit for bit (a NaN equals itself).
bool same(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

void Harness::push(Event e) {
    const double due = options_.clock == Clock::seconds ? e.at : 0.0;
    queue_.emplace(Key{due, next_seq_++}, std::move(e));
}

Harness::Event Harness::completion(int rank, int to, std::uint64_t id, bool ok, proto::Time at) {
    Event e;
    e.type = Event::completed;
    e.rank = rank;
    e.from = to;
    e.id = id;
    e.ok = ok;
    e.at = at;
    return e;
}

std::vector<float> Harness::host(int r, std::span<const float> v) const {
    std::vector<float> out(v.size());
    if (auto* device = workers_[idx(r)]->device())
        device->download(out, v.data());
    else
        std::copy(v.begin(), v.end(), out.begin());
    return out;
}

void Harness::apply(int r, proto::Actions& out) {
    for (auto& s : out.sends) send(r, std::move(s));
    for (const auto& d : out.deadlines) {
        Event e;
        e.type = Event::deadline;
        e.rank = r;
        e.id = d.id;
        e.at = options_.clock == Clock::seconds ? std::max(d.at, now_) : d.at;
        push(std::move(e));
    }
    if (out.start_step) start_step(r);
}

double Harness::step_duration(int r) {
    double t = options_.step_time;
    if (step_time_of)
        t = step_time_of(r, now_);
    else if (idx(r) < options_.step_times.size())
        t = options_.step_times[idx(r)];
    return t + options_.step_jitter * rng_.uniform();
}

void Harness::start_step(int r) {
    const std::int64_t step = steps_started_[idx(r)]++;
    if (on_step_start) on_step_start(r, step);
    proto::LocalWorker& w = *workers_[idx(r)];
    if (w.math()) {
        Stepping& s = stepping_[idx(r)];
        s.point = host(r, protocols_[idx(r)]->compute_point());
        s.x = host(r, w.params());
        s.gradient = host(r, w.gradient());
    }
    Event e;
    e.type = Event::step;
    e.rank = r;
    if (options_.clock == Clock::seconds) e.at = now_ + step_duration(r);
    push(std::move(e));
}

void Harness::check_step(int r) {
    proto::LocalWorker& w = *workers_[idx(r)];
    if (!w.math()) return;
    const Stepping& s = stepping_[idx(r)];
    const std::string who = "rank " + str(r) + " changed ";
    if (!same(host(r, protocols_[idx(r)]->compute_point()), s.point))
        fail_check(who + "its compute point while its step ran");
    if (!same(host(r, w.params()), s.x)) fail_check(who + "its parameters (x) while its step ran");
    if (!same(host(r, w.gradient()), s.gradient))
        fail_check(who + "the worker's gradient buffer while its step ran");
}

void Harness::send(int r, proto::Send s) {
    const proto::Message& m = s.msg;
    const int to = m.receiver;
    if (m.sender != r) fail_check("message sender " + str(m.sender) + " from rank " + str(r));
    if (m.receiver < 0 || m.receiver >= size() || m.receiver == r)
        fail_check("rank " + str(r) + " sent to rank " + str(m.receiver));
    if (!m.payload.empty() && m.payload.size() != m.elements)
        fail_check("payload of " + str(static_cast<std::int64_t>(m.payload.size())) +
                   " values, elements " + str(static_cast<std::int64_t>(m.elements)));
    auto& seq = edge_seq_[{r, m.receiver}];
    if (options_.check_edge_seq && m.edge_seq != seq)
        fail_check("edge " + str(r) + "->" + str(m.receiver) + " sequence " +
                   str(static_cast<std::int64_t>(m.edge_seq)) + ", expected " +
                   str(static_cast<std::int64_t>(seq)));
    ++seq;
    if (!s.borrowed.empty()) {
        if (!options_.zero_copy) fail_check("a borrowed send to a driver without zero-copy");
        if (!s.msg.payload.empty() || s.borrowed.size() != m.elements)
            fail_check("a borrowed send of " + str(static_cast<std::int64_t>(s.borrowed.size())) +
                       " values, elements " + str(static_cast<std::int64_t>(m.elements)));
        ++borrowed_sends_;
        s.msg.payload.assign(s.borrowed.begin(), s.borrowed.end());  // read at once
        lent_[{r, s.id}] = {s.borrowed, s.msg.payload};
    }
    if (on_send) on_send(s.msg);
    if (tamper) tamper(s.msg);
    sent_.push_back(s.msg);  // logged with its values
    if (!options_.log_payloads) sent_.back().payload = {};
    const bool seconds = options_.clock == Clock::seconds;
    if (drop && drop(s.msg)) {
        ++dropped_;
        if (options_.complete_sends) push(completion(r, to, s.id, true, now_ + options_.delay));
        return;
    }
    if (!seconds && !alive_[idx(to)]) {
        if (options_.complete_sends) push(completion(r, to, s.id, false, now_));
        return;
    }
    if (options_.zero_copy && alive_[idx(to)] && !s.msg.payload.empty()) {
        const auto place = protocols_[idx(to)]->receive_into(s.msg);
        if (!place.empty()) {
            if (place.size() != s.msg.elements)
                fail_check("receive_into gave " + str(static_cast<std::int64_t>(place.size())) +
                           " values for " + str(static_cast<std::int64_t>(s.msg.elements)));
            std::copy(s.msg.payload.begin(), s.msg.payload.end(), place.begin());
            s.msg.payload.clear();
            s.msg.placed = true;
            ++placed_;
        }
    }
    Event e;
    e.type = Event::message;
    e.rank = to;
    e.from = r;
    e.id = s.id;
    if (seconds) {
        double at = now_ + options_.delay + options_.delay_jitter * rng_.uniform();
        if (options_.fifo_channels) {
            double& last = last_arrival_[{r, to}];
            at = std::max(at, last);
            last = at;
        }
        if (hold) at += hold(s.msg);
        e.at = at;
        if (options_.complete_sends) {  // when its message arrives, ok unless `to` is dead then
            push(completion(r, to, s.id, true, at));
        }
    }
    e.msg = std::move(s.msg);
    push(std::move(e));
}

// Ticks: the keys of the events that may go next, oldest first: not a message behind an older
// one on its channel, not a deadline (or kill) in the future. When only those are left the
// clock jumps to the earliest.
std::vector<Harness::Key> Harness::eligible() {
    auto timed = [](const Event& e) { return e.type == Event::deadline || e.type == Event::kill; };
    const bool only_timed =
        std::all_of(queue_.begin(), queue_.end(), [&](const auto& kv) { return timed(kv.second); });
    if (only_timed && !queue_.empty()) {
        proto::Time first = queue_.begin()->second.at;
        for (const auto& [key, e] : queue_) first = std::min(first, e.at);
        now_ = std::max(now_, first - 1);  // deliver_one() advances the clock by 1 at least
    }
    std::vector<Key> out;
    const auto n = idx(size());
    std::vector<char> behind(n * n, 0);  // the channel already has a head
    for (const auto& [key, e] : queue_) {
        if (e.type == Event::message && options_.fifo_channels) {
            char& seen = behind[idx(e.from) * n + idx(e.rank)];
            if (seen) continue;
            seen = 1;
        }
        if (timed(e) && e.at > now_ + 1) continue;
        out.push_back(key);
        if (!options_.shuffle && !timed(e)) break;  // FIFO: the oldest
    }
    return out;
}

bool Harness::deliver_one() {
    Key pick;
    if (options_.clock == Clock::seconds) {
        if (queue_.empty()) return false;
        pick = queue_.begin()->first;
    } else {
        const auto candidates = eligible();
        if (candidates.empty()) return false;
        pick = candidates.front();
        if (options_.shuffle) pick = candidates[rng_.below(candidates.size())];
    }
    if (++events_ > options_.max_events) fail_check("too many events; a protocol loops");
    auto node = queue_.extract(pick);
    Event e = std::move(node.mapped());
    if (options_.clock == Clock::seconds)
        now_ = pick.first;
    else
        now_ = std::max(now_ + 1, e.type == Event::deadline || e.type == Event::kill ? e.at : now_);
    dispatch(e);
    if (after_event) after_event();
    return true;
}

void Harness::dispatch(Event& e) {
    const auto p = idx(e.rank);
    if (e.type == Event::kill) {
        alive_[p] = false;
        for (int q = 0; q < size(); ++q) {
            if (q == e.rank) continue;
            Event notice;
            notice.type = Event::notice;
            notice.rank = q;
            notice.from = e.rank;
            notice.at = now_ + options_.failure_notice;
            push(std::move(notice));
        }
        return;
    }
    if (!alive_[p]) {
        if (e.type == Event::message) undeliverable_.push_back(std::move(e.msg));
        return;
    }
    proto::Protocol& protocol = *protocols_[p];
    proto::Actions out;
    switch (e.type) {
        case Event::step: {
            check_step(e.rank);
            const double loss = workers_[p]->compute_gradient(protocol.compute_point());
            losses_[p].push_back(loss);
            protocol.step_finished(now_, loss, out);
            if (!out.start_step && !out.done) ++waits_;
            break;
        }
        case Event::message: {
            if (protocol.stepping()) ++early_;
            const int from = e.from;
            const std::uint64_t id = e.id;
            protocol.message_arrived(now_, std::move(e.msg), out);
            if (options_.clock == Clock::ticks && options_.complete_sends && alive_[idx(from)])
                push(completion(from, e.rank, id, true, now_));
            break;
        }
        case Event::completed: {
            if (auto it = lent_.find({e.rank, e.id}); it != lent_.end()) {
                const auto& [memory, values] = it->second;
                if (!std::equal(memory.begin(), memory.end(), values.begin(), values.end()))
                    fail_check("rank " + str(e.rank) + " changed the memory of send " +
                               str(static_cast<std::int64_t>(e.id)) + " before it completed");
                lent_.erase(it);
            }
            const bool ok = options_.clock == Clock::seconds ? alive_[idx(e.from)] : e.ok;
            protocol.send_completed(now_, e.id, ok, out);
            break;
        }
        case Event::deadline:
            ++deadlines_;
            protocol.deadline_reached(now_, e.id, out);
            break;
        case Event::notice:
            protocol.peer_failed(now_, e.from, out);
            break;
        case Event::kill:
            break;
    }
    apply(e.rank, out);
    if (options_.checkpoint_every > 0)
        if (auto s = protocol.take_snapshot()) snapshots_[p].push_back(std::move(*s));
}

}  // namespace gossamer::testing
