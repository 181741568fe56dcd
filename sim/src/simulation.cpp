#include "gossamer/sim/simulation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <variant>

#include "engine.hpp"
#include "gossamer/core/compute_model.hpp"
#include "gossamer/core/dataset.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/core/log.hpp"
#include "gossamer/core/params.hpp"
#include "gossamer/optimizers/local/training_worker.hpp"
#include "gossamer/optimizers/outer/streaming_worker.hpp"
#include "gossamer/optimizers/protocol/protocol.hpp"
#include "gossamer/optimizers/protocol/questions.hpp"
#include "gossamer/sim/event_queue.hpp"
#include "gossamer/sim/fair_network.hpp"
#include "gossamer/sim/network.hpp"
#include "sim_trace.hpp"

namespace gossamer::sim {
namespace detail {
Engine::Engine(const SimSetup& s)
    : s_(s),
      n_(s.topology->n()),
      compute_(*s.cluster, s.seed),
      network_(*s.cluster),
      fair_(s.cluster->network_model == NetworkModel::fair ? std::optional<FairNetwork>(*s.cluster)
                                                           : std::nullopt),
      peers_(static_cast<std::size_t>(n_)),
      trace_(s.trace) {
    if (s.cluster->n() != n_)
        throw Error(fmt::format("the cluster has {} peers, the topology {}", s.cluster->n(), n_));
    const bool math = s.mode == Mode::math;
    std::int64_t steps = s.steps;
    if (s.config)
        proto::check_outer_algorithm(s.config->outer, s.algorithm,
                                     s.options ? &*s.options : nullptr, s.config->doc.file);
    if (s.config && s.config->outer && !s.config->outer->identity())
        outer_h_ = s.config->outer->round_steps();
    if (math) {
        eval_model_ = optim::build_model(*s.config, *s.train);
        peer_test_ = first_samples(*s.test, s.peer_eval_samples);
        average_test_ = first_samples(
            *s.test, s.average_eval_samples > 0 ? s.average_eval_samples : s.test->size());
    }
    for (int r = 0; r < n_; ++r) {
        Peer& p = peers_[static_cast<std::size_t>(r)];
        if (math) {  // as a real peer's (optim::make_training_worker)
            auto w = optim::make_training_worker(
                *s.config, *s.train, r, n_, s.epochs, [&](const optim::Multirate& m) {
                    proto::check_multirate_algorithm(m, s.algorithm);
                });
            steps = w.steps;
            p.shard = std::move(w.shard);
            if (w.outer) {
                p.worker = std::move(w.outer);
                p.inner = std::move(w.trainer);
            } else {
                p.worker = std::move(w.trainer);
            }
        } else if (s.config && s.config->outer && !s.config->outer->identity()) {
            // Cost mode under "outer": s.steps are inner steps, taken in rounds.
            p.inner = std::make_unique<proto::CostOnlyWorker>(s.model_size);
            p.worker = optim::make_outer_layer(*p.inner, *s.config->outer, s.steps, nullptr,
                                               s.config->doc.file);
            steps = optim::outer_rounds(s.steps, *s.config->outer);
        } else {
            p.worker = std::make_unique<proto::CostOnlyWorker>(s.model_size);
        }
        steps_ = steps;
        p.protocol = make(r);
    }
    if (s.cluster->has_churn()) {
        const std::string why = peers_[0].protocol->elastic_refusal();
        if (!why.empty())
            throw ConfigError(s.cluster->source, "peers", why,
                              fmt::format("simulate algorithm {}, or drop join_at, leave_at and "
                                          "rejoin_at (docs/operations/elastic.md)",
                                          proto::elastic_choice()));
    }
    // The fifo network sends each peer's messages through its uplink one after another: the
    // measured edges time each send from its turn in that queue. The fair network shares the
    // uplink among the flows in flight, as TCP does between real peers' sends (no queue).
    speeds_.one_queue = !fair_.has_value();
    for (int r = 0; r < n_; ++r)
        peers_[static_cast<std::size_t>(r)].protocol->configure_edge_speeds(speeds_for(r));
    // A stall: no step for 1000 of the slowest declared steps (slow periods included), and at
    // least 10 virtual minutes.
    for (const PeerSpec& p : s.cluster->peers) {
        double slowest = 1;
        for (const SlowPeriod& sp : p.slow) slowest = std::max(slowest, sp.factor);
        stall_after_ = std::max(stall_after_, 1000 * p.base_time * p.factor * slowest);
    }
    result_.algorithm = s.algorithm;
    result_.seed = s.seed;
    result_.text = s.test && !s.test->vocabulary.empty();
}

void Engine::trace_step(int rank, const Peer& p, Time end, double loss) {
    if (!trace_.on()) return;
    if (!p.inner) return trace_.step(rank, p.step_start, end, p.started - 1, loss);
    // Under "outer": the round, its inner steps as ComputeModel ended them (a crash cuts them).
    std::vector<double> ends;
    for (const Time t : p.inner_ends) {
        ends.push_back(std::min(t, end));
        if (t >= end) break;
    }
    trace_.round(rank, p.step_start, ends, p.round, p.first_inner, outer_h_, loss);
}

bool Engine::active() const {
    return active_ > 0;
}

void Engine::handle(Time now, Event& e) {
    proto::Actions& a = fresh_actions();
    if (auto* d = std::get_if<StepDone>(&e)) {
        Peer& p = peers_[static_cast<std::size_t>(d->rank)];
        if (!live(d->rank, d->life)) return;
        p.stepping = false;
        p.idle_since = now;
        trace_step(d->rank, p, now, d->loss);
        trace_.cause({});
        ++peer_steps_;
        last_step_ = now;
        result_.samples += (s_.mode == Mode::math ? s_.config->batch_size : 1) * p.round_steps;
        judge_pending(d->rank, now);  // the model at the boundary, before this step's update
        p.protocol->step_finished(now, d->loss, a);
        apply(d->rank, now, a);
    } else if (auto* m = std::get_if<Arrival>(&e)) {
        Peer& p = peers_[static_cast<std::size_t>(m->rank)];
        transport::Message msg = take(m->message);
        if (!live(m->rank, m->life)) return drop(msg);  // lost with a dead peer
        trace_.receive(m->rank, now, msg);
        trace_.cause_message(msg);
        p.protocol->message_arrived(now, std::move(msg), a);
        apply(m->rank, now, a);
    } else if (auto* dl = std::get_if<DeadlineEvent>(&e)) {
        Peer& p = peers_[static_cast<std::size_t>(dl->rank)];
        if (!live(dl->rank, dl->life) || !p.applier.takes_deadline()) return;
        trace_.cause({trace::WaitCause::deadline});
        p.protocol->deadline_reached(now, dl->id, a);
        apply(dl->rank, now, a);
    } else if (auto* f = std::get_if<Failure>(&e)) {
        Peer& p = peers_[static_cast<std::size_t>(f->rank)];
        if (!p.alive || p.applier.done()) return;
        crash(f->rank);  // churn.cpp: the mass it held, its model for a rejoin
        p.alive = false;
        any_absent_ = true;
        note_membership(now);
        --active_;
        any_failed_ = true;
        if (p.stepping)
            p.busy -= p.step_end - now;  // the running step is lost with the peer
        else
            p.idle += now - p.idle_since;
        if (p.stepping) trace_step(f->rank, p, now, 0.0);
        if (!p.stepping) trace_.wait(f->rank, p.idle_since, now, {});
        trace_.failure(f->rank, now);
        for (int r = 0; r < n_; ++r) {
            if (r == f->rank) continue;
            ++pending_;
            queue_.push(now + s_.failure_detection, FailureNotice{r, f->rank, p.life});
        }
    } else if (auto* sd = std::get_if<SendDone>(&e)) {
        Peer& p = peers_[static_cast<std::size_t>(sd->rank)];
        if (!live(sd->rank, sd->life)) return;
        if (sd->counted >= 0) p.applier.completed(sd->counted);
        // Done or not: an outbox may still hold a share for this edge.
        p.protocol->send_completed(now, sd->id, true, a);
        apply(sd->rank, now, a);
    } else if (auto* fe = std::get_if<FlowEnd>(&e)) {
        if (!fair_->current(fe->flow, fe->version)) return;  // its rate changed since
        const Flowing f = flowing_[fe->flow];
        fair_->finish(fe->flow, now);
        unsettle(now);
        if (const Flowing* next = edge_lines_.pop(edge_key(f.rank, f.to))) start_flow(*next, now);
        // As under fifo: the uplink is done with it now, its last byte arrives a latency later.
        // Every send completes (edge speeds are measured from completions); only a bounded
        // protocol's data messages count against its edges.
        ++pending_;
        queue_.push(now, SendDone{f.rank, f.counted, f.id, f.life_from});
        ++pending_;
        queue_.push(now + network_.latency(f.rank, f.to), Arrival{f.to, f.message, f.life_to});
    } else if (std::holds_alternative<Settle>(e)) {
        settle_queued_ = false;
        fair_->settle(now, flow_updates_);
        for (const auto& u : flow_updates_) {
            ++pending_;
            queue_.push(u.end, FlowEnd{u.flow, u.version});
        }
        flow_updates_.clear();
    } else if (auto* pr = std::get_if<PartitionReady>(&e)) {
        Peer& p = peers_[static_cast<std::size_t>(pr->rank)];
        if (!live(pr->rank, pr->life) || !p.stepping || p.started - 1 != pr->step) return;
        p.protocol->partition_ready(now, pr->id, a);
        apply(pr->rank, now, a);
    } else if (auto* fn = std::get_if<FailureNotice>(&e)) {
        Peer& p = peers_[static_cast<std::size_t>(fn->rank)];
        // As real drivers do: a done protocol that is not settled still hears of failures.
        if (!p.alive || !p.applier.takes_failure(*p.protocol)) return;
        if (peers_[static_cast<std::size_t>(fn->dead)].life != fn->life) return;  // it is back
        trace_.peer_failed(fn->rank, now, fn->dead);
        trace_.cause({trace::WaitCause::failure, fn->dead, -1});
        p.protocol->peer_failed(now, fn->dead, a);
        apply(fn->rank, now, a);
    } else if (auto* j = std::get_if<Join>(&e)) {
        join(j->rank, now);  // churn.cpp
    } else if (auto* l = std::get_if<Leave>(&e)) {
        leave(l->rank, now);
    }
}

void Engine::evaluate(Time now, bool final) {
    EvalPoint ep;
    ep.time = now;
    ep.samples = result_.samples;
    for (const auto& p : peers_) {
        ep.bytes += p.past_sent + p.protocol->stats().bytes_sent;
        for (const auto& w : p.worker->work()) ep.backward_macs += w.backward_macs;
    }
    const std::size_t size = eval_model_->parameter_count();
    // The exact average of the live peers' models, weighted by the push-sum weight each holds:
    // sum_i w_i z_i / sum_i w_i = sum_i x_i / sum_i w_i, the network average push-sum preserves;
    // for averaging protocols w_i = 1 and this is the plain mean.
    std::vector<double> mean(size, 0.0);
    double total_w = 0;
    std::vector<ParamVector> models;
    std::vector<bool> judged;
    std::vector<int> ranks;  // of the models  // evaluated on its own: all, or the sampled ranks
                             // (--peer-metrics)
    const int every = s_.peer_records_every;
    for (int r = 0; r < n_; ++r) {
        auto& p = peers_[static_cast<std::size_t>(r)];
        // Live members only: a peer waiting for its sponsor has no model yet, one that left
        // handed its model on.
        if (!p.alive || p.left || p.protocol->joining()) continue;
        ranks.push_back(r);
        judged.push_back(every <= 1 || r % every == 0);
        ParamVector x(size);
        p.protocol->current_model(x.span());
        const double w = p.protocol->mass();
        for (std::size_t i = 0; i < size; ++i) mean[i] += w * x.span()[i];
        total_w += w;
        models.push_back(std::move(x));
    }
    if (models.empty() || !(total_w > 0)) return;
    if (std::none_of(judged.begin(), judged.end(), [](bool b) { return b; }))
        judged.assign(judged.size(), true);  // every sampled peer failed: judge the others
    ep.live = static_cast<int>(models.size());
    if (s_.peer_distances) ep.distance.assign(static_cast<std::size_t>(n_), -1.0);
    ParamVector avg(size);
    for (std::size_t i = 0; i < size; ++i) avg.span()[i] = static_cast<float>(mean[i] / total_w);
    const EvalResult all =
        eval_model_->evaluate(avg.span(), final ? *s_.test : average_test_, 1000);
    ep.accuracy = all.accuracy.value_or(0);
    ep.loss = all.loss;
    ep.min_accuracy = 1;
    double spread = 0;
    const auto evaluated = static_cast<double>(std::count(judged.begin(), judged.end(), true));
    // (model, (accuracy, loss)) judged at the end
    std::vector<std::pair<std::size_t, std::pair<double, double>>> seen;
    // While running, each peer's own model is judged at its next step boundary (as a real peer
    // copies it, docs/formats/metrics.md "Evaluation points"), for this tick: the sums fill in
    // then.
    const auto tick = static_cast<std::int64_t>(result_.evals.size());
    if (!final) {
        tick_sums_.emplace_back();
        judged_.clear();  // models of earlier ticks are not this tick's
    }
    for (std::size_t m = 0; m < models.size(); ++m) {
        const auto& x = models[m];
        Peer& peer = peers_[static_cast<std::size_t>(ranks[m])];
        if (judged[m] && !final && !peer.applier.done()) {
            peer.eval_pending = tick;  // replaces a tick it has not reached a boundary for
        } else if (judged[m] && !final) {
            tick_sums_.back().add(judge(x.span()));  // a peer that finished: its model is final
        } else if (judged[m]) {
            // At the end, on the whole test set. A model equal to one judged already (every
            // replica of allreduce) is not judged again.
            std::optional<std::pair<double, double>> judged_m;  // (accuracy, loss)
            for (const auto& [k, a] : seen)
                if (std::equal(x.span().begin(), x.span().end(), models[k].span().begin())) {
                    judged_m = a;
                    break;
                }
            if (!judged_m) {
                const auto e = eval_model_->evaluate(x.span(), *s_.test, 1000);
                judged_m = {e.accuracy.value_or(0), e.loss};
                seen.emplace_back(m, *judged_m);
            }
            const double acc = judged_m->first;
            ep.min_accuracy = std::min(ep.min_accuracy, acc);
            ep.max_accuracy = std::max(ep.max_accuracy, acc);
            ep.mean_accuracy += acc / evaluated;
            ep.mean_loss += judged_m->second / evaluated;
        }
        double own = 0;
        for (std::size_t i = 0; i < size; ++i) {
            const double d = x.span()[i] - avg.span()[i];
            own += d * d;
        }
        spread += own;
        if (s_.peer_distances) ep.distance[static_cast<std::size_t>(ranks[m])] = std::sqrt(own);
    }
    ep.consensus = std::sqrt(spread / static_cast<double>(models.size()));
    trace_.evaluation(now, ep.accuracy, ep.loss);
    result_.evals.push_back(ep);
}

// A model equal to one judged since the last tick (every replica of allreduce, whose peers
// reach their boundaries at different times when their speeds differ) is not judged again: 8
// identical evaluations per tick were most of an allreduce sim's time. Two models are kept,
// the latest: models that differ (gossip) differ in their first values, so a miss is cheap.
std::pair<double, double> Engine::judge(std::span<const float> x) {
    for (const auto& [model, judged] : judged_)
        if (std::equal(x.begin(), x.end(), model.begin(), model.end())) return judged;
    const auto e = eval_model_->evaluate(x, peer_test_, 1000);
    const std::pair<double, double> judged{e.accuracy.value_or(0), e.loss};
    if (judged_.size() >= 2) judged_.erase(judged_.begin());
    judged_.emplace_back(std::vector<float>(x.begin(), x.end()), judged);
    return judged;
}

void Engine::judge_pending(int rank, Time now) {
    Peer& p = peers_[static_cast<std::size_t>(rank)];
    if (p.eval_pending < 0) return;
    pending_model_.resize(eval_model_->parameter_count());
    p.protocol->current_model(pending_model_);
    const auto judged = judge(pending_model_);
    tick_sums_.at(static_cast<std::size_t>(p.eval_pending)).add(judged);
    p.eval_pending = -1;
    trace_.peer_evaluation(rank, now, judged.first);
}

// The ticks' per-peer figures from their sums; a tick no peer reached a boundary for (every
// step spanned it) repeats the one before, as a plot would.
void Engine::finish_ticks() {
    for (std::size_t i = 0; i < tick_sums_.size() && i < result_.evals.size(); ++i) {
        auto& ep = result_.evals[i];
        const auto& t = tick_sums_[i];
        if (t.count > 0) {
            ep.mean_accuracy = t.sum / t.count;
            ep.mean_loss = t.loss_sum / t.count;
            ep.min_accuracy = t.min;
            ep.max_accuracy = t.max;
        } else if (i > 0) {
            ep.mean_accuracy = result_.evals[i - 1].mean_accuracy;
            ep.mean_loss = result_.evals[i - 1].mean_loss;
            ep.min_accuracy = result_.evals[i - 1].min_accuracy;
            ep.max_accuracy = result_.evals[i - 1].max_accuracy;
        }
    }
}

SimResult Engine::run() {
    const auto wall_start = std::chrono::steady_clock::now();
    for (int r = 0; r < n_; ++r) {
        const Time fail = compute_.failure_time(r);
        if (std::isfinite(fail)) {
            ++pending_;
            queue_.push(fail, Failure{r});
        }
    }
    const bool math = s_.mode == Mode::math;
    active_ = n_;
    schedule_churn();  // churn.cpp: late joiners are not active yet
    if (math && s_.eval_interval > 0) queue_.push(0.0, Evaluate{});
    trace_.cause({trace::WaitCause::start});
    // Who is absent cannot change before the first event: found once, not once per peer
    // (tell_absent's scan made the start O(n^2): 30% of a 16,384-peer run of 5 steps).
    std::vector<int> absent;
    for (int r = 0; r < n_; ++r)
        if (!peers_[static_cast<std::size_t>(r)].alive) absent.push_back(r);
    for (int r = 0; r < n_; ++r) {
        if (!peers_[static_cast<std::size_t>(r)].alive) continue;  // joins later
        for (int q : absent) peers_[static_cast<std::size_t>(r)].protocol->peer_absent(q);
        proto::Actions& a = fresh_actions();
        peers_[static_cast<std::size_t>(r)].protocol->start(0.0, a);
        apply(r, 0.0, a);
    }
    note_membership(0.0);  // version 0: the members at the start
    Time now = 0;
    while (!queue_.empty()) {
        auto [t, e] = queue_.pop();
        now = t;
        ++result_.events;
        if (std::holds_alternative<Evaluate>(e)) {
            evaluate(now, false);
            if (active() && pending_ > 0) queue_.push(now + s_.eval_interval, Evaluate{});
            continue;
        }
        --pending_;
        handle(now, e);
        if (s_.progress && result_.events % 200000 == 0) {
            // Peer-steps, not events: an algorithm with more events per step must not look
            // faster.
            const double wall =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start)
                    .count();
            s_.progress(fmt::format(
                "{}: virtual time {:.1f} s, {} peer-steps ({:.0f}/s), {} events", s_.algorithm, now,
                peer_steps_, wall > 0 ? static_cast<double>(peer_steps_) / wall : 0.0,
                result_.events));
        }
        if (!active() && pending_ == 0) break;
        // Live peers that only exchange requests and deadlines (a dpsgd peer asking for a
        // round nobody will send) would run forever: no step for that long is a stall too.
        if (active() && now - last_step_ > stall_after_) break;
    }
    if (active()) {
        std::string waiting;
        for (int r = 0; r < n_ && waiting.size() < 60; ++r)
            if (peers_[static_cast<std::size_t>(r)].alive &&
                !peers_[static_cast<std::size_t>(r)].applier.done())
                waiting += (waiting.empty() ? "" : ", ") + std::to_string(r);
        throw Error(
            fmt::format("{}: the simulation stalled at virtual time {:.3f} s (no step since "
                        "{:.3f} s): peers {} wait for messages that will never come",
                        s_.algorithm, now, last_step_, waiting));
    }
    if (math) {
        // Peers still owing a tick (none reached a boundary after it) are judged as they are.
        for (int r = 0; r < n_; ++r)
            if (peers_[static_cast<std::size_t>(r)].alive) judge_pending(r, result_.end_time);
        finish_ticks();
        evaluate(result_.end_time, true);
    }
    for (int r = 0; r < n_; ++r) {
        const Peer& p = peers_[static_cast<std::size_t>(r)];
        PeerSummary ps;
        ps.rank = r;
        ps.steps = p.worker->steps();
        if (p.inner) {  // "outer": steps are rounds
            ps.outer = s_.config->outer->describe();
            ps.inner_steps = p.worker->inner_steps();
        }
        ps.busy = p.busy;
        ps.idle = p.idle;
        ps.idle_share = p.busy + p.idle > 0 ? p.idle / (p.busy + p.idle) : 0;
        ps.bytes_sent = p.past_sent + p.protocol->stats().bytes_sent;
        ps.messages_sent = p.past_messages + p.protocol->stats().messages_sent;
        ps.bytes_received = p.past_received + p.protocol->stats().bytes_received;
        ps.failed = !p.alive && p.crashed;
        ps.left = p.left;
        ps.joins = p.joins;
        ps.mass = p.alive ? p.protocol->mass() : 0.0;
        ps.recorded = s_.peer_records_every > 0 && r % s_.peer_records_every == 0;
        if (ps.recorded) ps.edges = p.protocol->edge_report();  // O(degree) JSON values each
        ps.staleness_max = p.protocol->stats().staleness_max;
        const auto work = p.worker->work();
        const auto& split = p.protocol->stats().partition_bytes_sent;
        if (!work.empty()) ps.partitions = json::Json::array();
        // Whole-model protocols send everything as partition 0: no split to report then.
        // Streaming fragments gossip by fragment, not by the trainer's partitions: no split.
        const auto* rates = p.worker->multirate();
        bool same_parts = !rates || rates->count() == work.size();
        for (std::size_t id = 0; same_parts && rates && id < work.size(); ++id)
            same_parts = rates->layout()[id].name == work[id].name;
        const bool split_known = same_parts && (split.size() > 1 || work.size() == 1);
        for (std::size_t id = 0; id < work.size(); ++id) {
            ps.backward_macs += work[id].backward_macs;
            json::Json part = {{"name", work[id].name},
                               {"updates", work[id].updates},
                               {"backward_macs", work[id].backward_macs}};
            if (split_known) part["bytes_sent"] = id < split.size() ? split[id] : 0;
            ps.partitions.push_back(std::move(part));
        }
        if (p.alive) result_.mass += p.protocol->mass();
        result_.peers.push_back(ps);
    }
    result_.mass_start = starters_;
    result_.mass_lost = starters_ - result_.mass;
    result_.crash_loss = crash_loss_;
    // A protocol whose ring cannot go on without a peer (all-reduce unless it is rebuilt,
    // "elastic") stops on a failure: name the rank.
    if (any_failed_ && peers_[0].protocol->failure_stops_job())
        for (const auto& ps : result_.peers)
            if (ps.failed) result_.stopped_by_failure = ps.rank;
    result_.wall_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
    return result_;
}

}  // namespace detail

SimResult simulate(const SimSetup& setup) {
    if (!setup.topology || !setup.cluster)
        throw Error("simulate: a topology and a cluster are needed");
    if (setup.mode == Mode::math && (!setup.config || !setup.train || !setup.test))
        throw Error("simulate: math mode needs a training config and data");
    detail::Engine engine(setup);
    return engine.run();
}

}  // namespace gossamer::sim
