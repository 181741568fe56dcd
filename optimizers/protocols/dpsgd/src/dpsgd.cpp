#include "gossamer/optimizers/protocols/dpsgd/dpsgd.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocol/device.hpp"
#include "gossamer/optimizers/protocol/gossip_mix.hpp"

namespace gossamer::proto {

// Send times kept per out-edge, to tell a lost message from one still in flight.

DpsgdOptions parse_dpsgd_options(const json::Node* options) {
    DpsgdOptions o;
    if (!options) return o;
    options->expect_object(
        {"mode", "delay", "resync_timeout", "reweight", "chunk_bytes", "partition_ready"});
    if (auto chunk = options->find("chunk_bytes")) o.chunk_bytes = parse_chunk_bytes(*chunk);
    if (auto mode = options->find("mode"))
        o.mode = mode->as_enum({"atc", "cta"}) == "atc" ? DpsgdMode::atc : DpsgdMode::cta;
    if (auto delay = options->find("delay")) {
        o.delay = static_cast<int>(delay->as_int(0, 1));
        if (o.delay > 0 && o.mode == DpsgdMode::cta)
            delay->fail("delay 1 is a variant of mode atc; cta already overlaps its messages",
                        "use \"mode\": \"atc\" with delay 1, or cta with delay 0");
        if (o.delay > 0 && options->find("reweight"))
            delay->fail("delay 1 does not combine with reweight",
                        "drop one of \"delay\" and \"reweight\"");
    }
    if (auto ready = options->find("partition_ready")) {
        o.partition_ready = ready->as_bool();
        if (o.partition_ready && options->find("reweight"))
            ready->fail(
                "partition_ready does not combine with reweight (a reweighted mix waits "
                "for a deadline, not for a partition)",
                "drop one of \"partition_ready\" and \"reweight\"");
    }
    if (auto timeout = options->find("resync_timeout")) {
        o.resync_timeout = timeout->as_double();
        if (!(o.resync_timeout > 0))
            timeout->fail(fmt::format("resync_timeout {} must be > 0 seconds", o.resync_timeout),
                          "use e.g. 1.0");
    }
    if (auto rw = options->find("reweight")) {
        rw->expect_object({"wait", "decay"});
        DpsgdOptions::Reweight r;
        if (auto v = rw->find("wait")) {
            r.wait = v->as_double();
            if (!(r.wait > 0) || !std::isfinite(r.wait))
                v->fail(fmt::format("wait {} must be > 0 seconds", r.wait), "use e.g. 0.1");
        }
        if (auto v = rw->find("decay")) {
            r.decay = v->as_double();
            if (!(r.decay > 0) || r.decay > 1)
                v->fail(fmt::format("decay {} must be in (0, 1]", r.decay),
                        "use e.g. 0.5 (weight halves per round of staleness)");
        }
        o.reweight = r;
    }
    return o;
}

Dpsgd::Dpsgd(PeerContext ctx, DpsgdOptions options) : Protocol(std::move(ctx)), options_(options) {
    const auto& topo = context().topology;
    if (!topo) throw Error("dpsgd needs a topology");
    if (topo->n() != n())
        throw Error(fmt::format("the topology has {} peers but the job has {}", topo->n(), n()));
    if (topo->kind() != topology::WeightKind::averaging)
        throw TopologyError(fmt::format(
            "dpsgd needs averaging weights (rows summing to 1) but {} has {} weights; use sgp "
            "for push-sum weights",
            topo->describe(), topology::to_string(topo->kind())));
    if (!(options_.resync_timeout > 0)) throw Error("dpsgd: resync_timeout must be > 0");
    if (options_.delay < 0 || options_.delay > 1 ||
        (options_.delay > 0 && (options_.mode == DpsgdMode::cta || options_.reweight)))
        throw Error("dpsgd: delay 1 needs mode atc without reweight");
    // One size for the whole job: receivers cut the model into the same channels as senders.
    const std::uint64_t chunk_bytes =
        job_chunk_bytes(options_.chunk_bytes, context().cluster.get(), *topo);
    for (PartitionChannel& spec : partition_channels(worker(), chunk_bytes / 4)) {
        Channel c;
        static_cast<PartitionChannel&>(c) = std::move(spec);
        c.slot = static_cast<std::uint32_t>(channels_.size());
        index_.add(c, channels_.size());
        channels_.push_back(std::move(c));
    }
    // The codec streams hold the channel in bits 48..63 (stream()).
    if (channels_.size() > (1u << 16))
        throw ConfigError(
            "", "chunk_bytes",
            fmt::format("{} bytes cut the model into {} chunks", chunk_bytes, channels_.size()),
            "use chunks of at least 1/65536 of the model, or \"auto\"");
    check_ready_option();
}

bool Dpsgd::due(const Channel& c) const {
    return optim::Multirate::due(c.period, t_, c.phase);
}

std::uint64_t Dpsgd::stream(const Channel& c, int sender, int receiver) const {
    // By slot: every chunk its own stream (the partition id when nothing is chunked).
    return (std::uint64_t{c.slot} << 48) | (static_cast<std::uint64_t>(sender) << 24) |
           static_cast<std::uint64_t>(receiver);
}

std::span<const float> Dpsgd::compute_point() {
    // Not params(): the compute side reads x while the step runs, which is the point.
    return context().worker->params();
}

void Dpsgd::current_model(std::span<float> out) const {
    copy_params_to(out);
}

const ReplicaSender* Dpsgd::out_edge(int j, std::size_t c) const {
    const auto& out = channels_.at(c).out;
    auto it = out.find(j);
    return it == out.end() ? nullptr : &it->second;
}

const ReplicaReceiver* Dpsgd::in_edge(int j, std::size_t c) const {
    const auto& in = channels_.at(c).in;
    auto it = in.find(j);
    return it == in.end() ? nullptr : &it->second;
}

ReplicaReceiver& Dpsgd::receiver(Channel& c, int j) {
    auto it = c.in.find(j);
    if (it == c.in.end())
        it = c.in.emplace(j, ReplicaReceiver(j, c.size, worker().math(), c.compressor.get(),
                                             stream(c, j, rank()), worker().device()))
                 .first;
    return it->second;
}

Dpsgd::Channel* Dpsgd::channel_of(const Message& msg) {
    const auto slot = index_.find(msg.partition, msg.chunk);
    return slot ? &channels_[*slot] : nullptr;
}

void Dpsgd::on_start(Time now, Actions& out) {
    if (context().max_steps <= 0) {
        stage_ = Stage::done;
        out.done = true;
        return;
    }
    begin_round(now, out);
}

void Dpsgd::begin_round(Time now, Actions& out) {
    // Rounds before t_ mixed, nothing of round t_ sent or applied (dpsgd_state.cpp).
    if (entered_cut()) cut(t_);
    // cta: round t's messages carry x_t, so they leave now, before the compute side owns x.
    if (options_.mode == DpsgdMode::cta) send_round(now, out);
    stage_ = Stage::stepping;
    out.start_step = true;
}

void Dpsgd::send_round(Time now, Actions& out) {
    ++sent_;
    const std::span<const float> x = params();
    for (Channel& c : channels_)
        if (due(c) && !sent_early(c)) send_channel(now, c, x, out);
    reset_ready();  // the step's round is out: the next step starts afresh
}

void Dpsgd::send_channel(Time now, Channel& c, std::span<const float> x, Actions& out) {
    const auto round = context().topology->at(c.round);
    const auto part = worker().math() ? x.subspan(c.offset, c.size) : x;
    for (int j : round->graph.out_neighbors(rank())) {
        if (dead_.contains(j) || !sends_to(j, c.round)) continue;
        auto it = c.out.find(j);
        if (it == c.out.end())
            it = c.out
                     .emplace(j, ReplicaSender(j, c.size, worker().math(), c.compressor.get(),
                                               stream(c, rank(), j), worker().device()))
                     .first;
        const std::uint64_t seq = it->second.next_seq();
        Message m = it->second.encode(part, c.round);
        m.partition = c.id;
        m.chunk = c.chunk;
        m.sent_at = now;  // a rejoined peer's receivers drop its old self's messages
        send(out, std::move(m));
        c.sent_at[j].posted(seq, out.sends.back().id);
        in_flight_.add(out.sends.back().id, {c.slot, j});
    }
}

void Dpsgd::on_step_finished(Time now, double, Actions& out) {
    if (leave_due_)
        return leave_now(now, out);  // dpsgd_elastic.cpp: this step's round never leaves
    if (options_.delay > 0) {
        // Mix the previous round first (its messages travelled during this step), then this
        // step's gradient goes onto the mixed x.
        grad_pending_ = true;
        stage_ = Stage::waiting;
        return try_mix(now, out);
    }
    if (options_.mode == DpsgdMode::atc) {
        worker().apply_gradient(params(), worker().gradient());
        send_round(now, out);
    }
    // cta keeps the gradient in the worker's buffer until the mix is done: nothing overwrites it
    // before the next start_step.
    stage_ = Stage::waiting;
    serve_sponsored(now, out);  // x is the protocol's until the next step starts
    try_mix(now, out);
}

void Dpsgd::try_mix(Time now, Actions& out) {
    if (stage_ != Stage::waiting) return;
    // Delayed, after the first step: no round has been sent yet, so none is mixed.
    if (options_.delay > 0 && t_ >= sent_) return after_delayed_mix(now, out);
    const int i = rank();
    // Only the channels due at step t travel; with none due the step ends at once.
    struct Plan {
        Channel* c;
        double self;
        std::vector<std::pair<int, double>> weights;
    };
    std::vector<Plan> plans;
    bool missing = false;
    const bool reweight = options_.reweight.has_value();
    for (Channel& c : channels_) {
        if (!due(c) || mixed_early(c)) continue;  // partition_ready: mixed during the step
        const auto round = context().topology->at(c.round);
        Plan plan{&c, round->weights.at(i, i), {}};
        for (int j : round->graph.in_neighbors(i)) {
            const double w = round->weights.at(i, j);
            if (dead_.contains(j) || !mixes_with(j, c.round)) {
                plan.self += w;  // a dead or absent neighbour's weight moves to our own
                continue;
            }
            if (acks_due_.contains(j)) {  // joining: its first round is not known yet
                missing = true;
                continue;
            }
            ReplicaReceiver& r = receiver(c, j);
            // Reweighting takes the newest state that has come, even one of a later round.
            r.advance(reweight ? std::numeric_limits<std::int64_t>::max() : c.round);
            missing = missing || !r.covers(c.round);
            plan.weights.emplace_back(j, w);
        }
        plans.push_back(std::move(plan));
    }
    if (missing && reweight && stale_round_ == t_) {
        // The wait is over: down-weight what is behind, give the rest to our own weight.
        for (auto& plan : plans)
            for (auto& [j, w] : plan.weights) {
                const std::int64_t r = plan.c->in.at(j).round(), now_round = plan.c->round;
                const std::int64_t behind = r < 0 ? -1 : now_round - std::min(now_round, r);
                const double keep = behind < 0 ? 0.0 : std::pow(options_.reweight->decay, behind);
                plan.self += w * (1.0 - keep);
                w *= keep;
                in_stats_[j].staleness = std::max<std::int64_t>(0, behind);
                in_stats_[j].stale += behind != 0;
            }
        ++stale_mixes_;
        missing = false;
    } else if (!missing) {
        for (const auto& plan : plans)
            for (const auto& [j, w] : plan.weights) in_stats_[j].staleness = 0;
    }
    if (missing && reweight && stale_deadline_ == 0) {
        stale_deadline_ = next_deadline_++;
        stale_round_ = -1;
        out.deadlines.push_back({now + options_.reweight->wait, stale_deadline_});
    }
    if (missing) {
        if (armed_deadline_ == 0) {
            armed_deadline_ = next_deadline_++;
            out.deadlines.push_back({now + options_.resync_timeout, armed_deadline_});
        }
        return;
    }
    armed_deadline_ = 0;  // a deadline still pending for this wait is now stale
    stale_deadline_ = 0;
    for (auto& plan : plans) mix_channel(*plan.c, params(), plan.self, std::move(plan.weights));
    if (options_.mode == DpsgdMode::cta) worker().apply_gradient(params(), worker().gradient());
    ++t_;
    ++mutable_stats().rounds;
    if (options_.delay > 0) return after_delayed_mix(now, out);
    if (t_ >= context().max_steps) {
        stage_ = Stage::done;
        out.done = true;
        return;
    }
    begin_round(now, out);
}

void Dpsgd::mix_channel(Channel& c, std::span<float> x, double self,
                        std::vector<std::pair<int, double>> weights) {
    for (const auto& [j, w] : weights) {
        InStats& st = in_stats_[j];
        st.weight = w;
        ++st.mixes;
        st.staleness_sum += st.staleness;
    }
    if (Device* d = worker().device(); d && worker().math()) {
        std::vector<DeviceTerm> terms;
        terms.reserve(weights.size());
        for (const auto& [j, w] : weights)
            if (w > 0) terms.push_back({c.in.at(j).replica().data(), w});
        d->mix(x.data() + c.offset, self, terms, c.size);
    } else if (worker().math()) {
        std::vector<detail::MixTerm> terms;
        terms.reserve(weights.size());
        for (const auto& [j, w] : weights)
            if (w > 0) terms.push_back({w, c.in.at(j).replica()});
        detail::mix(x.subspan(c.offset, c.size), self, terms);
    }
    ++c.round;
    last_self_weight_ = self;
    last_weights_ = std::move(weights);
}

void Dpsgd::after_delayed_mix(Time now, Actions& out) {
    if (!grad_pending_) {  // the last step's round is mixed: the model is final
        if (t_ >= context().max_steps) {
            stage_ = Stage::done;
            out.done = true;
        }
        return;
    }
    grad_pending_ = false;
    worker().apply_gradient(params(), worker().gradient());  // the partitions not stepped early
    send_round(now, out);  // round t_ = the step just finished (every earlier one is mixed)
    if (sent_ < context().max_steps) {
        stage_ = Stage::stepping;  // at h_t, unmixed: round t travels meanwhile
        out.start_step = true;
        return;
    }
    try_mix(now, out);  // the last round: mixed once its messages are in, then done
}

void Dpsgd::on_message(Time now, Message msg, Actions& out) {
    const int j = msg.sender;
    if (j < 0 || j >= n() || j == rank())
        throw Error(fmt::format("dpsgd: a message from invalid peer {}", j));
    if (on_membership(now, msg, out)) return;  // dpsgd_elastic.cpp
    switch (msg.kind) {
        case MessageKind::full_model:
        case MessageKind::model_delta: {
            Channel* c = channel_of(msg);
            if (!c)
                throw Error(fmt::format(
                    "dpsgd: a message from peer {} for partition {} chunk {}; this "
                    "peer gossips {} partition(s) in {} channel(s)",
                    j, msg.partition, msg.chunk, index_.partitions(), channels_.size()));
            ReplicaReceiver& r = receiver(*c, j);
            r.accept(std::move(msg));
            // Absorbed as it arrives (even while a step runs: replicas are the protocol's), up
            // to the round this channel mixes next; the mix then finds it done.
            if (!options_.reweight) r.advance(c->round);
            advance_ready(now, out);  // partition_ready: a ready channel may mix now
            try_mix(now, out);
            return;
        }
        case MessageKind::control: {
            // A re-sync request for message msg.edge_seq. Answered once that message's send
            // completed at least resync_timeout ago (or failed): one still in flight is slow, not
            // lost, and if it is lost the next ask, a timeout later, finds it old enough
            // (recent_sends.hpp). Answered even after done, so that a neighbour that lost our
            // last message can finish.
            Channel* cp = channel_of(msg);
            if (!cp) return;
            Channel& c = *cp;
            auto it = c.out.find(j);
            if (it == c.out.end() || dead_.contains(j) || !it->second.sent(msg.edge_seq)) return;
            if (!c.sent_at[j].answer(msg.edge_seq, now, options_.resync_timeout)) return;
            ++resync_answers_;
            Message m = it->second.resync();
            m.partition = c.id;
            m.chunk = c.chunk;
            m.sent_at = now;
            send(out, std::move(m));
            return;
        }
        default:
            throw Error(fmt::format("dpsgd: unexpected {} message from peer {}",
                                    transport::to_string(msg.kind), j));
    }
}

void Dpsgd::on_send_completed(Time now, std::uint64_t id, bool ok, Actions&) {
    const auto e = in_flight_.take(id);
    if (!e) return;
    const auto [slot, j] = *e;
    if (slot < channels_.size()) channels_[slot].sent_at[j].completed(id, now, ok);
}

void Dpsgd::on_deadline(Time now, std::uint64_t id, Actions& out) {
    if (id == stale_deadline_ && stage_ == Stage::waiting) {
        stale_round_ = t_;
        return try_mix(now, out);
    }
    if (id != armed_deadline_ || stage_ != Stage::waiting) return;
    for (Channel& c : channels_) {
        if (!due(c)) continue;
        const auto round = context().topology->at(c.round);
        for (int j : round->graph.in_neighbors(rank())) {
            if (dead_.contains(j) || !mixes_with(j, c.round) || acks_due_.contains(j)) continue;
            ReplicaReceiver& r = receiver(c, j);
            if (r.covers(c.round)) continue;
            ++resync_requests_;
            Message req = resync_request(j, c.id, r.next_seq(), c.round);
            req.chunk = c.chunk;
            req.sent_at = now;
            send(out, std::move(req));
        }
    }
    armed_deadline_ = next_deadline_++;
    out.deadlines.push_back({now + options_.resync_timeout, armed_deadline_});
}

void Dpsgd::on_peer_failed(Time now, int j, Actions& out) {
    if (j == rank() || j < 0 || j >= n()) return;
    dead_.insert(j);
    acks_due_.erase(j);
    cut_acks_due_.erase(j);
    if (joining() && j == sponsor_) ask_sponsor(now, out);  // dpsgd_elastic.cpp
    try_mix(now, out);
}

json::Json Dpsgd::edge_metrics() const {
    json::Json out = json::Json::array();
    for (const auto& [j, st] : in_stats_)
        out.push_back({{"peer", j},
                       {"weight", st.weight},
                       {"staleness", st.staleness},
                       {"staleness_mean", st.mixes > 0 ? static_cast<double>(st.staleness_sum) /
                                                             static_cast<double>(st.mixes)
                                                       : 0.0},
                       {"stale", st.stale},
                       {"mixes", st.mixes}});
    return out;
}

std::unique_ptr<Protocol> make_dpsgd(const json::Node* options, PeerContext ctx) {
    return std::make_unique<Dpsgd>(std::move(ctx), parse_dpsgd_options(options));
}

}  // namespace gossamer::proto

namespace gossamer::proto {

std::optional<Protocol::NonFinite> Dpsgd::first_non_finite_value(
    const Message& msg, std::span<const float> values) const {
    // A delta on a channel with a compressor is its words (codec 0 all the same).
    if (msg.kind == MessageKind::model_delta)
        if (const auto slot = index_.find(msg.partition, msg.chunk)) {
            const Channel& c = channels_[*slot];
            if (c.compressor) return non_finite_in(c.compressor.get(), values, c.size);
        }
    return Protocol::first_non_finite_value(msg, values);
}

bool Dpsgd::compressed(const Message& msg) const {
    if (msg.kind != MessageKind::model_delta) return Protocol::compressed(msg);
    const auto slot = index_.find(msg.partition, msg.chunk);
    return !slot || channels_[*slot].compressor != nullptr;
}

}  // namespace gossamer::proto
