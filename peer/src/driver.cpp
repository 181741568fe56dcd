#include "gossamer/peer/driver.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <thread>
#include <variant>

#include "gossamer/core/error.hpp"
#include "gossamer/core/log.hpp"
#include "gossamer/core/metrics.hpp"
#include "gossamer/core/ranks_text.hpp"
#include "gossamer/optimizers/outer/outer_worker.hpp"
#include "gossamer/optimizers/protocol/action_applier.hpp"
#include "peer_trace.hpp"

namespace gossamer::peer {
namespace {

using Clock = std::chrono::steady_clock;
using transport::Message;
using transport::Status;

struct Arrived {
    Message msg;
};
struct SendDone {
    std::uint64_t id;
    Status status;
    bool control = false;  // a control message's (a re-sync request): not progress
    double at = -1;        // when the transport reported it (the measured edges time it)
};
struct Failed {
    Status status;
};
using Event = std::variant<Arrived, SendDone, Failed>;

// What the transport's callbacks reach. Shared with them, so a send that completes after run()
// returned (or threw) still finds its message alive and its queue.
struct Inbox {
    std::deque<Event> events;
    std::map<std::uint64_t, Message> in_flight;  // the transport reads these payloads
    // Zero-copy sends (proto::Send::borrowed): the protocol's memory the transport reads instead
    // of the message's payload; the protocol keeps it unchanged until send_completed.
    std::map<std::uint64_t, std::span<const float>> borrowed;
};

// H of the outer layer when `w` is one (the trace then shows rounds), else 0.
std::int64_t outer_steps(const proto::LocalWorker& w) {
    const auto* o = dynamic_cast<const optim::OuterWorker*>(&w);
    return o ? o->options().round_steps() : 0;
}

double seconds(Clock::duration d) {
    return std::chrono::duration<double>(d).count();
}

// How far the job's clock (DriverOptions::job_start) is ahead of the driver's, seconds; 0
// without one.
double job_shift(const DriverOptions& o) {
    if (!o.job_start) return 0;
    return std::chrono::duration<double>(std::chrono::system_clock::now() - *o.job_start).count();
}

// The declared step time on the job's clock: slow periods are moments of the job.
DeclaredStepTime on_job_clock(DeclaredStepTime f, double shift) {
    if (!f || shift == 0) return f;
    return [f = std::move(f), shift](std::int64_t step, double start) {
        return f(step, start + shift);
    };
}

// Messages the transport dropped, by reason (only those that happened).
json::Json dropped_json(const transport::DropCounters& d) {
    json::Json out = json::Json::object();
    for (std::size_t r = 0; r < transport::kDropReasons; ++r) {
        const auto reason = static_cast<transport::DropReason>(r);
        if (d[reason] > 0) out[std::string(transport::to_string(reason))] = d[reason];
    }
    return out;
}

class Loop final : proto::ActionTarget {
  public:
    Loop(proto::Protocol& p, proto::LocalWorker& w, transport::Transport& t, const DriverOptions& o)
        : protocol_(p),
          worker_(w),
          transport_(t),
          options_(o),
          start_(Clock::now()),
          shift_(job_shift(o)),
          fail_at_(o.fail_at - shift_),
          leave_at_(o.leave_at - shift_),
          entry_deadline_(o.enter && o.entry_timeout.count() > 0
                              ? seconds(o.entry_timeout)
                              : std::numeric_limits<double>::infinity()),
          trace_(p.rank(), o.trace_path, o.trace_limit, std::chrono::system_clock::now(),
                 o.clock_offset),
          outer_h_(outer_steps(w)),
          compute_(w, on_job_clock(o.declared_step_time, shift_), [&t] { t.wake(); }),
          comm_thread_(std::this_thread::get_id()) {
        result_.rank = p.rank();
        if (!o.metrics_path.empty()) metrics_.emplace(o.metrics_path);
    }
    DriverResult run();

  private:
    double now();
    void apply(proto::Actions& a);
    // What the loop does for each action (proto::ActionApplier calls them, in its order).
    void refused(const proto::Refusal& r) override;
    void send(proto::Send& s, bool counted) override;
    void deadline(double at, std::uint64_t id) override { deadlines_.emplace(at, id); }
    void start_step() override;
    void done() override { result_.end_time = last_; }
    void transmit(std::uint64_t id);  // hands in-flight message `id` to the transport
    double pace(const Message& m);
    void release_due();
    bool deliver_one();
    void plan_ready();
    void deliver(Event& e, proto::Actions& a);
    std::string waiting_for();
    void watch();
    void finish();
    void write_extra();

    proto::Protocol& protocol_;
    proto::LocalWorker& worker_;
    transport::Transport& transport_;
    const DriverOptions& options_;
    const Clock::time_point start_;
    // The job's clock minus this driver's (DriverOptions::job_start), and the failure and leave
    // times on this driver's clock.
    const double shift_, fail_at_, leave_at_;
    const double entry_deadline_;  // an entering peer not stepping by then gives up
    double last_ = 0;              // the last event's time: times never go back
    double last_event_ = 0;        // the last progress (deliver_one), for the watchdog
    double next_watch_ = 0;
    std::shared_ptr<Inbox> inbox_ = std::make_shared<Inbox>();
    using Pending = std::pair<double, std::uint64_t>;
    std::priority_queue<Pending, std::vector<Pending>, std::greater<>> deadlines_;
    std::priority_queue<Pending, std::vector<Pending>, std::greater<>> held_;  // paced sends
    // Partition-ready events of the running step: (time, partition id), and that step.
    std::priority_queue<Pending, std::vector<Pending>, std::greater<>> ready_;
    std::int64_t running_step_ = -1;
    double step_start_ = 0;
    std::map<int, double> link_free_;  // destination -> when its emulated link is free
    // Checks and orders the protocol's actions (one data message in flight per edge for the
    // protocols that promise it) and knows whether it is done; the receiver of each send
    // counted against its edge, until its completion is delivered.
    proto::ActionApplier applier_;
    std::map<std::uint64_t, int> bounded_;
    std::int64_t next_step_ = 0;
    bool entered_ = false;  // the first step has started (an entering peer's is renumbered)
    std::map<int, std::pair<std::int64_t, double>> heard_;  // peer -> (round, time) last heard
    std::map<int, std::string> failures_;
    std::optional<MetricsWriter> metrics_;
    DriverResult result_;
    bool gave_up_settling_ = false;  // settle_timeout passed
    PeerTracer trace_;
    // Under "outer" (the worker is an optim::OuterWorker): its H, and the trace shows rounds.
    const std::int64_t outer_h_ = 0;
    ComputeThread compute_;  // last: its thread stops before the rest goes
    const std::thread::id comm_thread_;
};

double Loop::now() {
    last_ = std::max(last_, seconds(Clock::now() - start_));
    return last_;
}

void Loop::apply(proto::Actions& a) {
    assert(std::this_thread::get_id() == comm_thread_);
    if (auto snap = protocol_.take_snapshot(); snap && options_.on_snapshot)
        options_.on_snapshot(std::move(*snap));  // docs/operations/checkpoint.md
    applier_.apply(protocol_, last_, a, *this);
}

void Loop::refused(const proto::Refusal& r) {  // docs/operations/reliability.md
    const std::string why = fmt::format("it sent a {} (round {}) holding {}",
                                        transport::to_string(r.kind), r.round, r.reason);
    failures_[r.sender] = why;
    result_.failed_peers.push_back(r.sender);
    trace_.peer_failed(last_, r.sender);
    log::warn("rank {}: refused a message on edge {} -> {}: {}; treating rank {} as failed",
              result_.rank, r.sender, result_.rank, why, r.sender);
    if (metrics_)
        metrics_->write({{"rank", result_.rank},
                         {"time", last_},
                         {"event", "refused"},
                         {"from", r.sender},
                         {"kind", std::string(transport::to_string(r.kind))},
                         {"round", r.round},
                         {"partition", r.partition},
                         {"reason", r.reason}});
}

void Loop::send(proto::Send& s, bool counted) {
    const std::uint64_t id = s.id;
    if (counted) bounded_.emplace(id, s.msg.receiver);
    Message& m = inbox_->in_flight.emplace(id, std::move(s.msg)).first->second;
    if (!s.borrowed.empty())
        inbox_->borrowed.emplace(id, s.borrowed);
    else if (m.payload.size() != m.elements)  // cost-only: a transport carries `elements`
        m.payload.resize(m.elements);
    trace_.send(last_, m);
    const double release = pace(m);
    if (release > last_) {
        held_.emplace(release, id);  // emulated link: the hold is part of its time
    } else {
        protocol_.send_handed_over(id, seconds(Clock::now() - start_));
        transmit(id);
    }
}

void Loop::start_step() {
    trace_.starting();
    // A peer that entered a running job steps from the job's step, which its worker took from
    // the sponsor (LocalWorker::enter_at): its records and model checkpoints say so.
    if (options_.enter && !entered_) next_step_ = worker_.steps();
    entered_ = true;
    running_step_ = next_step_;
    step_start_ = last_;
    ready_ = {};
    compute_.start_on_comm(next_step_++, last_, protocol_.compute_point());
}

void Loop::write_extra() {
    if (!options_.extra_metrics) return;
    for (const auto& line : options_.extra_metrics()) {
        trace_.evaluation(line);
        if (metrics_) metrics_->write(line);
    }
}

void Loop::transmit(std::uint64_t id) {
    const Message& m = inbox_->in_flight.at(id);
    const auto lent = inbox_->borrowed.find(id);
    const auto values =
        lent != inbox_->borrowed.end() ? lent->second : std::span<const float>(m.payload);
    transport_.send(
        m, std::as_bytes(values),
        [inbox = inbox_, id, &t = transport_, start = start_](const Status& st) {
            // Called from the transport's progress(), so `t` is alive: the payload
            // goes back to its pool for later receives instead of being freed.
            auto it = inbox->in_flight.find(id);
            bool control = false;
            if (it != inbox->in_flight.end()) {
                control = it->second.kind == transport::MessageKind::control;
                if (!it->second.payload.empty()) t.recycle(std::move(it->second.payload));
                inbox->in_flight.erase(it);
                inbox->borrowed.erase(id);
            }
            inbox->events.push_back(SendDone{id, st, control, seconds(Clock::now() - start)});
        });
}

// When the emulated link lets `m` go: sends on one link queue behind each other, each taking
// wire bytes / bandwidth, then the link's latency. Release times on a link never decrease, so
// the heap keeps each link's order.
double Loop::pace(const Message& m) {
    if (!options_.link) return last_;
    const LinkPacing p = options_.link(m.receiver);
    double& free = link_free_[m.receiver];
    const double begin = std::max(last_, free);
    free = begin + (p.bandwidth > 0 ? static_cast<double>(m.wire_bytes()) / p.bandwidth : 0.0);
    return free + p.latency;
}

void Loop::release_due() {
    const double t = seconds(Clock::now() - start_);
    while (!held_.empty() && held_.top().first <= t) {
        const auto id = held_.top().second;
        held_.pop();
        transmit(id);
    }
}

void Loop::deliver(Event& e, proto::Actions& a) {
    const double t = now();
    if (auto* m = std::get_if<Arrived>(&e)) {
        heard_[m->msg.sender] = {m->msg.round, t};
        trace_.receive(t, m->msg);
        protocol_.message_arrived(t, std::move(m->msg), a);
    } else if (auto* s = std::get_if<SendDone>(&e)) {
        if (!s->status.ok())
            log::debug("rank {}: a send failed: {}", result_.rank, s->status.reason);
        if (auto it = bounded_.find(s->id); it != bounded_.end()) {
            applier_.completed(it->second);
            bounded_.erase(it);
        }
        protocol_.send_completed(t, s->id, s->status.ok(), a, s->at);
    } else if (auto* f = std::get_if<Failed>(&e)) {
        const int dead = f->status.peer;
        if (protocol_.refused_peer(dead)) return;  // failed already, when its message was refused
        failures_[dead] = f->status.reason;
        result_.failed_peers.push_back(dead);
        trace_.peer_failed(t, dead);
        log::warn("rank {}: peer {} failed: {}", result_.rank, dead, f->status.reason);
        // A done protocol that still settles waits for nothing more from a failed peer.
        if (applier_.takes_failure(protocol_)) protocol_.peer_failed(t, dead, a);
    }
}

// Progress, for the watchdog and the stall timeout: a step, data that came or left, a failure,
// or an event after which the protocol starts a step, sends data or ends. Not progress: a
// deadline or control message that only leads to more of them (dpsgd's and choco's re-sync
// requests every resync_timeout), so a wait that never ends is reported as allreduce's is.
bool progress(const proto::Actions& a) {
    if (a.start_step || a.done) return true;
    return std::any_of(a.sends.begin(), a.sends.end(), [](const proto::Send& s) {
        return s.msg.kind != transport::MessageKind::control;
    });
}

void Loop::plan_ready() {
    // The gradient is final and the compute thread pads the step: declare the later partitions
    // at their points of the declared step, as the simulator does (backward_ready_fractions).
    const auto computed = compute_.take_computed_on_comm();
    if (!computed || computed->step != running_step_ || !protocol_.takes_partition_ready()) return;
    const auto* parts = worker_.partitions();
    if (!parts || parts->count() < 2) return;
    const auto f = proto::backward_ready_fractions(*parts, worker_.size());
    for (std::size_t id = parts->count(); id-- > 1;)
        ready_.emplace(step_start_ + computed->took * f[id], id);
}

bool Loop::deliver_one() {
    proto::Actions a;
    bool moved = false;
    plan_ready();
    if (auto d = compute_.take_done_on_comm()) {
        moved = true;
        const double t = now();
        ++result_.steps;
        result_.busy += d->took;
        result_.step_log.push_back({d->step, t, d->loss, d->took, t + shift_});
        if (options_.on_step) options_.on_step(result_.step_log.back());
        const StepWait w = outer_h_ > 0 ? trace_.round(t, d->took, d->step, d->first_inner,
                                                       d->inner, outer_h_, d->loss)
                                        : trace_.step(t, d->took, d->step, d->loss);
        if (metrics_)
            metrics_->write({{"rank", result_.rank},
                             {"step", d->step},
                             {"time", t},
                             {"loss", d->loss},
                             {"step_seconds", d->took},
                             {"wait", w.seconds},
                             {"waited_for", w.peer}});
        // Partitions not declared during the padding (an unpadded step, or a step that took
        // longer than declared) are declared now, in the order a backward pass finishes them,
        // just before the step ends (declaring one twice counts once).
        ready_ = {};
        if (protocol_.takes_partition_ready())
            if (const auto* parts = worker_.partitions())
                for (std::size_t id = parts->count(); id-- > 1;)
                    protocol_.partition_ready(t, static_cast<std::uint32_t>(id), a);
        protocol_.step_finished(t, d->loss, a);
    } else if (!deadlines_.empty() && deadlines_.top().first <= seconds(Clock::now() - start_)) {
        const auto id = deadlines_.top().second;
        deadlines_.pop();
        if (!applier_.takes_deadline()) return true;
        trace_.cause({trace::WaitCause::deadline});
        protocol_.deadline_reached(now(), id, a);
    } else if (!ready_.empty() && ready_.top().first <= seconds(Clock::now() - start_)) {
        const auto id = static_cast<std::uint32_t>(ready_.top().second);
        ready_.pop();
        if (!compute_.busy()) return true;
        protocol_.partition_ready(now(), id, a);
    } else if (!inbox_->events.empty()) {
        Event e = std::move(inbox_->events.front());
        inbox_->events.pop_front();
        if (const auto* m = std::get_if<Arrived>(&e))
            moved = m->msg.kind != transport::MessageKind::control;
        else if (const auto* sd = std::get_if<SendDone>(&e))
            moved = !sd->control;
        else
            moved = true;  // a failed peer
        deliver(e, a);
    } else {
        return false;
    }
    moved = moved || progress(a);
    apply(a);
    if (moved) {
        last_event_ = last_;
        next_watch_ = last_event_ + seconds(options_.watchdog);
    }
    return true;
}

std::string Loop::waiting_for() {
    std::string s = fmt::format(
        "rank {} ({}): {} steps, {} rounds; {}; {} sends in flight", result_.rank, protocol_.name(),
        result_.steps, protocol_.stats().rounds,
        compute_.busy() ? "a local step is running" : "no step running", inbox_->in_flight.size());
    if (!held_.empty()) s += fmt::format(" ({} held by link pacing)", held_.size());
    std::string to;
    for (const auto& [id, m] : inbox_->in_flight)
        if (to.size() < 60) to += fmt::format("{}{}", to.empty() ? "" : ", ", m.receiver);
    if (!to.empty()) s += " (to " + to + ")";
    std::string heard;
    for (const auto& [peer, rt] : heard_)
        heard += fmt::format("{}peer {} round {} at {:.2f} s", heard.empty() ? "" : ", ", peer,
                             rt.first, rt.second);
    s += "; last heard: " + (heard.empty() ? std::string("nothing yet") : heard);
    std::string silent;
    for (int p = 0; p < protocol_.n() && silent.size() < 60; ++p)
        if (p != result_.rank && !heard_.contains(p) && !failures_.contains(p))
            silent += fmt::format("{}{}", silent.empty() ? "" : ", ", p);
    if (!silent.empty()) s += "; never heard from peers " + silent;
    for (const auto& [peer, why] : failures_) s += fmt::format("; peer {} failed", peer);
    return s;
}

void Loop::watch() {
    const double t = seconds(Clock::now() - start_);
    if (applier_.done()) {
        // Settling (run()'s loop): the others are still training, as in the exact average.
        if (!gave_up_settling_ && t - result_.end_time >= seconds(options_.settle_timeout)) {
            log::warn(
                "rank {} ({}): stopped waiting for the last messages of peers {} after {:.1f} s; "
                "what they still send here is lost",
                result_.rank, protocol_.name(), ranks_text(protocol_.settling_on()),
                seconds(options_.settle_timeout));
            gave_up_settling_ = true;
        }
        return;
    }
    if (!entered_ && t >= entry_deadline_)
        throw EntryTimeout(fmt::format(
            "no member admitted this peer within {:.1f} s of its entry (its sponsor did not "
            "answer: the others may have finished training): {}",
            entry_deadline_, waiting_for()));
    if (t >= next_watch_) {
        log::warn("watchdog: no progress for {:.1f} s: {}", t - last_event_, waiting_for());
        next_watch_ = t + seconds(options_.watchdog);
    }
    if (t - last_event_ >= seconds(options_.stall_timeout))
        throw Timeout(fmt::format("no progress for {:.1f} s (stall timeout): {}", t - last_event_,
                                  waiting_for()));
    if (t >= seconds(options_.run_timeout))
        throw Timeout(fmt::format("the run took longer than its timeout of {:.1f} s: {}",
                                  seconds(options_.run_timeout), waiting_for()));
}

void Loop::finish() {
    if (!applier_.done()) result_.end_time = now();
    result_.idle = std::max(0.0, result_.end_time - result_.busy);
    result_.stats = protocol_.stats();
    result_.edges = protocol_.edge_report();
    write_extra();
    trace_.finish(result_.end_time, result_.failed);
    if (!metrics_) return;
    const auto& st = result_.stats;
    json::Json summary = {{"summary", true},
                          {"rank", result_.rank},
                          {"algorithm", std::string(protocol_.name())},
                          {"steps", result_.steps},
                          {"end_time", result_.end_time},
                          {"job_shift", shift_},
                          {"busy", result_.busy},
                          {"idle", result_.idle},
                          {"bytes_sent", st.bytes_sent},
                          {"bytes_received", st.bytes_received},
                          {"messages_sent", st.messages_sent},
                          {"messages_received", st.messages_received},
                          {"messages_refused", st.messages_refused},
                          {"rounds", st.rounds},
                          {"mass", protocol_.mass()},
                          {"mass_lost", st.mass_lost},
                          {"failed", result_.failed},
                          {"failed_peers", result_.failed_peers},
                          {"dropped", dropped_json(transport_.drops())},
                          {"edges", result_.edges}};
    // Under "outer" "steps" are rounds: the inner steps too (docs/modules/peer.md, "Metrics").
    if (const auto* o = dynamic_cast<const optim::OuterWorker*>(&worker_)) {
        summary["outer"] = o->options().describe();
        summary["inner_steps"] = o->inner_steps();
    }
    metrics_->write(summary);
}

DriverResult Loop::run() {
    // The caller's messages are taken as they arrive, not when the loop delivers them: the loop
    // may end (protocol done) with arrived messages still queued.
    transport_.on_receive([inbox = inbox_, &intercept = options_.intercept](Message&& m) {
        if (intercept && intercept(m)) return;
        inbox->events.push_back(Arrived{std::move(m)});
    });
    transport_.on_peer_failed(
        [inbox = inbox_](const Status& s) { inbox->events.push_back(Failed{s}); });
    // Zero-copy (docs/algorithms/protocol-contract.md, "Memory"): borrowed sends, payloads placed
    // by the protocol.
    protocol_.enable_zero_copy();
    transport_.on_place(
        [&p = protocol_](const Message& h) { return std::as_writable_bytes(p.receive_into(h)); });
    // However run() ends (returned, threw), the peer is gone after it: later messages are
    // handed back to the transport, later failures ignored.
    struct Detach {
        transport::Transport& t;
        ~Detach() {
            t.on_receive([&tr = t](Message&& m) { tr.recycle(std::move(m.payload)); });
            t.on_peer_failed([](const Status&) {});
            t.on_place({});
        }
    } detach{transport_};
    next_watch_ = seconds(options_.watchdog);
    compute_.wake_when_computed(protocol_.takes_partition_ready());
    next_step_ = protocol_.resumed_at();  // a resumed protocol carries on from its cut
    {
        proto::Actions a;
        for (int r : options_.absent) protocol_.peer_absent(r);
        if (options_.enter)
            protocol_.join(now(), *options_.enter, a);
        else
            protocol_.start(now(), a);
        apply(a);
    }
    // After done, a protocol that is not settled still takes messages (async's last shares), and
    // one that holds sends back (an outbox) still takes their edges' completions.
    while (!(protocol_.done() && (!options_.settle || gave_up_settling_ || protocol_.settled()) &&
             inbox_->in_flight.empty() && protocol_.unsent() == 0)) {
        const double t = seconds(Clock::now() - start_);
        if (!applier_.done() && t >= fail_at_) {
            log::warn("rank {}: emulated failure at {:.3f} s", result_.rank, t + shift_);
            result_.failed = true;
            break;
        }
        if (options_.poll) options_.poll();
        if (!result_.left && !protocol_.done() &&
            (t >= leave_at_ || (options_.leave_requested && options_.leave_requested()))) {
            result_.left = true;
            log::info("rank {}: leaving the job gracefully at the next step boundary",
                      result_.rank);
            proto::Actions a;
            protocol_.leave(now(), a);
            apply(a);
        }
        write_extra();
        watch();
        release_due();
        if (deliver_one()) continue;
        // Block in the transport until something may have happened or the next timer is due.
        double until = applier_.done()
                           ? result_.end_time + seconds(options_.settle_timeout)
                           : std::min({next_watch_, last_event_ + seconds(options_.stall_timeout),
                                       seconds(options_.run_timeout), fail_at_,
                                       result_.left ? seconds(options_.run_timeout) : leave_at_});
        if (!entered_) until = std::min(until, entry_deadline_);
        if (!deadlines_.empty()) until = std::min(until, deadlines_.top().first);
        if (!ready_.empty()) until = std::min(until, ready_.top().first);
        if (!held_.empty()) until = std::min(until, held_.top().first);
        // A protocol that acts on its measured edges needs completions stamped when they
        // happen: a transport may not wake the loop for one (UCX over TCP), so while its sends
        // are in flight the loop looks every 2 ms (docs/algorithms/protocol-contract.md, "Measured
        // edges").
        if (protocol_.acts_on_edge_speeds() && !inbox_->in_flight.empty())
            until = std::min(until, t + 0.002);
        const double wait = std::clamp(until - t, 0.0, 1.0);
        transport_.wait(Millis(static_cast<std::int64_t>(std::ceil(wait * 1000))));
    }
    finish();
    return result_;
}

}  // namespace

Driver::Driver(proto::Protocol& protocol, proto::LocalWorker& worker,
               transport::Transport& transport, DriverOptions options)
    : protocol_(protocol), worker_(worker), transport_(transport), options_(std::move(options)) {}

DriverResult Driver::run() {
    Loop loop(protocol_, worker_, transport_, options_);
    DriverResult r = loop.run();
    if (const auto failed = protocol_.stopped_by())
        throw PeerFailure(
            *failed, fmt::format("all-reduce on rank {} stops after {} steps", r.rank, r.steps));
    return r;
}

}  // namespace gossamer::peer
