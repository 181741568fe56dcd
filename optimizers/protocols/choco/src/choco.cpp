#include "gossamer/optimizers/protocols/choco/choco.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <utility>

#include "gossamer/core/error.hpp"
#include "gossamer/core/mixing.hpp"
#include "gossamer/optimizers/protocol/edge_replica.hpp"

namespace gossamer::proto {

namespace {

// Send times kept per out-edge, to tell a lost message from one still in flight.

// Per-edge replicas keep the average only when what peer i subtracts (the receivers' weights
// of its out-edges) equals what it adds (its weights of its in-edges): column sums of W equal
// row sums, i.e. W is doubly stochastic. Returns (in-weight, out-weight) of peer i.
std::pair<double, double> edge_weight_sums(const topology::Round& round, int i) {
    double in = 0, out = 0;
    for (int k : round.graph.in_neighbors(i)) in += round.weights.at(i, k);
    for (int j : round.graph.out_neighbors(i)) out += round.weights.at(j, i);
    return {in, out};
}

bool balanced(const topology::Round& round, int i) {
    const auto [in, out] = edge_weight_sums(round, i);
    return std::abs(in - out) <= 1e-9;
}

std::string unbalanced_message(const topology::Round& round, std::int64_t t,
                               const std::string& topo, int i) {
    const auto [in, out] = edge_weight_sums(round, i);
    return fmt::format(
        "choco on a time-varying topology needs doubly stochastic rounds; in round {} of {} peer "
        "{} gives its in-neighbours weight {:.6g} but its out-neighbours give it {:.6g}; use "
        "metropolis_hastings weights or a schedule whose rounds are permutations (one-peer "
        "exponential, random matching)",
        t, topo, i, in, out);
}

}  // namespace

ChocoOptions parse_choco_options(const json::Node* options) {
    ChocoOptions o;
    if (!options) return o;
    options->expect_object({"gamma", "compressor", "resync_timeout", "replicas", "delay",
                            "chunk_bytes", "partition_ready", "edge_compression"});
    if (auto ready = options->find("partition_ready")) o.partition_ready = ready->as_bool();
    if (auto chunk = options->find("chunk_bytes")) o.chunk_bytes = parse_chunk_bytes(*chunk);
    if (auto delay = options->find("delay")) o.delay = static_cast<int>(delay->as_int(0, 1));
    if (auto gamma = options->find("gamma")) {
        o.gamma = gamma->as_double();
        if (!(o.gamma > 0 && o.gamma <= 1))
            gamma->fail(fmt::format("gamma {} is outside (0, 1]", o.gamma), "use e.g. 0.5");
    }
    if (auto c = options->find("compressor")) o.compressor = optim::parse_compressor_config(*c);
    if (auto r = options->find("replicas")) {
        const auto v = r->as_enum({"auto", "shared", "per_edge"});
        o.replicas = v == "auto"     ? ChocoReplicas::automatic
                     : v == "shared" ? ChocoReplicas::shared
                                     : ChocoReplicas::per_edge;
    }
    if (auto e = options->find("edge_compression")) {
        o.edge_compression = parse_edge_codec_tiers(*e);
        if (o.replicas == ChocoReplicas::shared)
            e->fail("needs per-edge replicas, but replicas is \"shared\"",
                    "drop \"replicas\": \"shared\" (each edge then keeps its own replica)");
    }
    if (auto timeout = options->find("resync_timeout")) {
        o.resync_timeout = timeout->as_double();
        if (!(o.resync_timeout > 0))
            timeout->fail(fmt::format("resync_timeout {} must be > 0 seconds", o.resync_timeout),
                          "use e.g. 1.0");
    }
    return o;
}

Choco::Choco(PeerContext ctx, ChocoOptions options)
    : Protocol(std::move(ctx)),
      options_(options),
      compressor_(optim::make_compressor(options_.compressor)),
      codecs_(options_.edge_compression) {
    const auto& topo = context().topology;
    if (!topo) throw Error("choco needs a topology");
    if (topo->n() != n())
        throw Error(fmt::format("the topology has {} peers but the job has {}", topo->n(), n()));
    if (topo->kind() != topology::WeightKind::averaging)
        throw TopologyError(
            fmt::format("choco needs averaging weights (rows summing to 1) but {} has {} weights",
                        topo->describe(), topology::to_string(topo->kind())));
    if (!(options_.gamma > 0 && options_.gamma <= 1)) throw Error("choco: gamma must be in (0, 1]");
    if (!(options_.resync_timeout > 0)) throw Error("choco: resync_timeout must be > 0");
    if (options_.delay < 0 || options_.delay > 1) throw Error("choco: delay must be 0 or 1");
    if (worker().device()) {  // codecs with no device kernels are refused before anything runs
        optim::check_device_codec(options_.compressor, "choco.compressor");
        for (std::size_t i = 0; i < options_.edge_compression.size(); ++i)
            optim::check_device_codec(options_.edge_compression[i].compressor,
                                      fmt::format("choco.edge_compression[{}].compressor", i));
    }
    const auto period = topo->period();
    shared_ = options_.replicas == ChocoReplicas::shared ||
              (options_.replicas == ChocoReplicas::automatic && period && *period == 1);
    // Per-edge compression: a delta's compressor depends on its edge, so every edge keeps its
    // own replica (docs/algorithms/compression.md, "Per-edge compression").
    if (codecs_.on() && options_.replicas == ChocoReplicas::shared)
        throw Error("choco: per-edge compression needs per-edge replicas");
    if (codecs_.on()) shared_ = false;
    if (shared_ && !period)
        throw TopologyError(fmt::format(
            "choco with shared replicas needs a periodic topology, but {} draws its rounds at "
            "random; use \"replicas\": \"per_edge\" (or \"auto\")",
            topo->describe()));
    if (shared_) {
        std::set<int> outs;
        for (std::int64_t t = 0; t < *period; ++t)
            for (int j : topo->at(t)->graph.out_neighbors(rank())) outs.insert(j);
        base_out_.assign(outs.begin(), outs.end());
    }
    if (period && !shared_)
        for (std::int64_t t = 0; t < *period; ++t)
            if (!balanced(*topo->at(t), rank()))
                throw TopologyError(unbalanced_message(*topo->at(t), t, topo->describe(), rank()));
    // One size for the whole job: receivers cut the model into the same channels as senders.
    const std::uint64_t chunk_bytes =
        job_chunk_bytes(options_.chunk_bytes, context().cluster.get(), *topo);
    for (PartitionChannel& spec : partition_channels(worker(), chunk_bytes / 4)) {
        Channel c;
        static_cast<PartitionChannel&>(c) = std::move(spec);
        c.q = c.compressor ? c.compressor.get() : compressor_.get();
        c.slot = static_cast<std::uint32_t>(channels_.size());
        index_.add(c, channels_.size());
        channels_.push_back(std::move(c));
    }
    // The codec streams hold the channel in bits 48..62 (key()).
    if (channels_.size() > (1u << 15))
        throw ConfigError(
            "", "chunk_bytes",
            fmt::format("{} bytes cut the model into {} chunks", chunk_bytes, channels_.size()),
            "use chunks of at least 1/32768 of the model, or \"auto\"");
    check_ready_option();
}

Choco::Channel* Choco::channel_of(const Message& msg) {
    const auto slot = index_.find(msg.partition, msg.chunk);
    return slot ? &channels_[*slot] : nullptr;
}

bool Choco::due(const Channel& c) const {
    return optim::Multirate::due(c.period, t_, c.phase);
}

std::span<const float> Choco::compute_point() {
    return context().worker->params();
}

void Choco::current_model(std::span<float> out) const {
    copy_params_to(out);
}

void Choco::take(Xhat& xhat, std::vector<float> values) {
    Device* d = worker().device();
    if (!d) {
        xhat.host = std::move(values);
        return;
    }
    if (xhat.dev.size() != values.size()) xhat.dev = DeviceVector(*d, values.size());
    d->upload(xhat.dev.data(), values);
}

std::vector<float> Choco::payload_of(const Xhat& xhat) const {
    if (xhat.dev.empty()) return xhat.host;
    std::vector<float> out(xhat.dev.size());
    context().worker->device()->download(out, xhat.dev.data());
    return out;
}

std::span<const float> Choco::public_replica(int j, std::size_t c) const {
    const Channel& ch = channels_.at(c);
    auto it = ch.out.find(j);
    if (it == ch.out.end()) return {};
    return shared_ ? ch.own.xhat.view() : it->second.slot.xhat.view();
}

std::span<const float> Choco::neighbour_replica(int j, std::size_t c) const {
    const Channel& ch = channels_.at(c);
    auto it = ch.in.find(j);
    return it == ch.in.end() ? std::span<const float>() : it->second.xhat.view();
}

std::uint64_t Choco::sent_on(int j, std::size_t c) const {
    const Channel& ch = channels_.at(c);
    auto it = ch.out.find(j);
    return it == ch.out.end() ? 0 : it->second.slot.next_seq;
}

std::uint64_t Choco::applied_from(int j, std::size_t c) const {
    const Channel& ch = channels_.at(c);
    auto it = ch.in.find(j);
    return it == ch.in.end() ? 0 : it->second.next_seq;
}

optim::CodecKey Choco::key(const Channel& c, int sender, int receiver, std::uint64_t seq) const {
    // Shared replica: one message for all receivers, so the stream names only the sender.
    // Channel (partition) c > 0 sets bits 48..62, which ranks below 2^16 leave free.
    const auto s = static_cast<std::uint64_t>(sender);
    const std::uint64_t stream =
        shared_ ? s : (1ull << 63) | (s << 32) | static_cast<std::uint32_t>(receiver);
    return {0, stream | (std::uint64_t{c.slot} << 48), seq};
}

void Choco::on_start(Time, Actions& out) {
    if (context().max_steps <= 0) {
        out.done = true;
        return;
    }
    out.start_step = true;
}

void Choco::on_step_finished(Time now, double, Actions& out) {
    if (options_.delay > 0) {
        // Mix the previous round first (its messages travelled during this step), then this
        // step's gradient goes onto the mixed x.
        grad_pending_ = true;
        waiting_ = true;
        return try_mix(now, out);
    }
    worker().apply_gradient(params(), worker().gradient());
    send_round(now, out);
    waiting_ = true;
    try_mix(now, out);
}

Message Choco::encode(Channel& c, Slot& slot, int receiver) {
    const std::size_t n = c.size;
    const bool math = worker().math();
    Message m;
    m.round = c.round;
    m.partition = c.id;
    m.chunk = c.chunk;
    m.edge_seq = slot.next_seq++;
    slot.last_round = c.round;
    if (m.edge_seq == 0) {
        // First contact: the replica starts at x, sent whole (4 bytes a value).
        m.kind = MessageKind::full_model;
        m.elements = n;
        if (math) {
            const auto x = x_of(c);
            if (Device* d = worker().device()) {
                if (slot.xhat.dev.size() != n) slot.xhat.dev = DeviceVector(*d, n);
                d->copy(slot.xhat.dev.data(), x.data(), n);
            } else {
                slot.xhat.host.assign(x.begin(), x.end());
            }
            m.payload = payload_of(slot.xhat);
        }
        return m;
    }
    m.kind = MessageKind::model_delta;
    // Per-edge compression: this edge's codec from its measured throughput, named in the header.
    const optim::Compressor* q = c.q;
    if (codecs_.on() && receiver >= 0) {
        m.codec = codecs_.choose(edge_speeds().throughput(receiver));
        q = codecs_.compressor(m.codec, c.q);
        OutEdge& e = c.out[receiver];
        if (e.codecs.size() <= m.codec) e.codecs.resize(m.codec + std::size_t{1}, 0);
        ++e.codecs[m.codec];
    }
    m.elements = EdgeCodecs::words(q, n);
    if (!math) return m;
    const auto k = key(c, rank(), receiver, m.edge_seq);
    m.payload.resize(m.elements);
    if (Device* d = worker().device()) {
        if (dscratch_.size() < n) dscratch_ = DeviceVector(*d, worker().size());
        d->delta(dscratch_.data(), x_of(c).data(), slot.xhat.dev.data(), n);
        encode_delta(q, std::span<const float>(dscratch_.data(), n), k, m.payload,
                     std::span<float>(slot.xhat.dev.data(), n), d);
        return m;
    }
    scratch_.resize(n);
    gossamer::delta(scratch_, x_of(c), slot.xhat.host);
    encode_delta(q, scratch_, k, m.payload, slot.xhat.host);
    return m;
}

void Choco::send_round(Time now, Actions& out) {
    ++sent_;
    for (Channel& c : channels_)
        if (due(c) && !sent_early(c)) send_channel(now, c, out);
    reset_ready();  // the step's round is out: the next step starts afresh
}

void Choco::send_channel(Time, Channel& c, Actions& out) {
    const auto round = context().topology->at(c.round);
    const auto outs = round->graph.out_neighbors(rank());
    auto sent = [&](OutEdge& e, std::uint64_t seq, int j) {
        e.recent.posted(seq, out.sends.back().id);
        in_flight_.add(out.sends.back().id, {c.slot, j});
    };
    if (shared_) {
        // One compression per round for every out-neighbour of the period (and x_hat_i moves
        // even with none: it is also the x_hat_i of the mix). Every holder of x_hat_i must
        // see every message, so on a time-varying topology all of the union's out-neighbours
        // get it.
        Message m = encode(c, c.own, -1);
        for (int j : base_out_) {
            if (dead_.contains(j)) continue;
            OutEdge& e = c.out[j];
            e.slot.next_seq = c.own.next_seq;
            e.slot.last_round = c.round;
            Message copy = m;
            copy.receiver = j;
            send(out, std::move(copy));
            sent(e, m.edge_seq, j);
        }
        return;
    }
    if (!balanced(*round, rank()))
        throw TopologyError(
            unbalanced_message(*round, c.round, context().topology->describe(), rank()));
    for (int j : outs) {
        if (dead_.contains(j)) continue;
        OutEdge& e = c.out[j];
        Message m = encode(c, e.slot, j);
        const std::uint64_t seq = m.edge_seq;
        m.receiver = j;
        send(out, std::move(m));
        sent(e, seq, j);
    }
}

void Choco::advance(Channel& c, int j, InEdge& e) {
    const std::size_t n = c.size;
    for (auto it = e.queued.begin(); it != e.queued.end() && it->first == e.next_seq;
         it = e.queued.begin()) {
        const Message& m = it->second;
        if (m.round > c.round) break;
        if (worker().math()) {
            if (e.xhat.view().size() != n)
                throw Error(fmt::format("choco: a delta from peer {} before its full model", j));
            // The sender's codec for this delta (edge_codec.hpp); 0: the channel's compressor.
            const optim::Compressor* q = codecs_.compressor(m.codec, c.q);
            if (m.payload.size() != EdgeCodecs::words(q, n))
                throw Error(fmt::format("choco: a delta from peer {} of {} words, expected {}", j,
                                        m.payload.size(), EdgeCodecs::words(q, n)));
            Device* d = worker().device();
            decode_delta(q, m.payload, key(c, j, rank(), m.edge_seq),
                         d ? std::span<float>(e.xhat.dev.data(), n) : std::span<float>(e.xhat.host),
                         d);
        }
        e.covered = std::max(e.covered, m.round);
        ++e.next_seq;
        e.queued.erase(it);
    }
}

void Choco::try_mix(Time now, Actions& out) {
    if (!waiting_) return;
    // Delayed, after the first step: no round has been sent yet, so none is mixed.
    if (options_.delay > 0 && t_ >= sent_) return after_delayed_mix(now, out);
    const int i = rank();
    // Every channel due at step t must have its round's messages in before any is mixed.
    for (Channel& c : channels_) {
        if (!due(c) || mixed_early(c)) continue;  // partition_ready: mixed during the step
        const auto round = context().topology->at(c.round);
        for (int j : round->graph.in_neighbors(i)) {
            if (dead_.contains(j)) continue;
            InEdge& e = c.in[j];
            advance(c, j, e);
            if (e.covered < c.round) {  // round r_c's message from j is not in yet
                if (armed_deadline_ == 0) {
                    armed_deadline_ = next_deadline_++;
                    out.deadlines.push_back({now + options_.resync_timeout, armed_deadline_});
                }
                return;
            }
        }
    }
    waiting_ = false;
    armed_deadline_ = 0;  // a deadline still pending for this wait is now stale
    for (Channel& c : channels_)
        if (due(c) && !mixed_early(c)) mix_channel(c);
    ++t_;
    ++mutable_stats().rounds;
    if (options_.delay > 0) return after_delayed_mix(now, out);
    if (t_ >= context().max_steps) {
        out.done = true;
        return;
    }
    out.start_step = true;
}

void Choco::mix_channel(Channel& c) {
    const int i = rank();
    const auto g = static_cast<float>(options_.gamma);
    const auto round = context().topology->at(c.round);
    ++c.round;
    if (!worker().math()) return;
    std::vector<MixTerm> terms;
    float self_sum = 0;  // sum of gamma W_ij over live neighbours (shared mode)
    for (int j : round->graph.in_neighbors(i)) {
        if (dead_.contains(j)) continue;
        const auto w = g * static_cast<float>(round->weights.at(i, j));
        terms.push_back({c.in.at(j).xhat.view(), w});
        if (shared_) self_sum += w;
    }
    if (!shared_)
        // Subtract x_hat_ij with receiver j's weight W_ji: every edge's term enters once with
        // + at its receiver and once with - at its sender, so the average is kept.
        for (int j : round->graph.out_neighbors(i))
            if (!dead_.contains(j))
                terms.push_back({c.out.at(j).slot.xhat.view(),
                                 -g * static_cast<float>(round->weights.at(j, i))});
    // x <- x + gamma sum_j W_ij (x_hat_j - x_hat_i): one fused pass.
    if (shared_ && !terms.empty()) terms.push_back({c.own.xhat.view(), -self_sum});
    if (Device* d = worker().device()) {
        std::vector<DeviceTerm> dterms;  // float weights, exact in double
        for (const MixTerm& t : terms) dterms.push_back({t.data.data(), t.weight});
        d->mix(x_of(c).data(), 1.0, dterms, c.size);
    } else {
        gossamer::mix(x_of(c), 1.0f, terms);
    }
}

std::span<float> Choco::x_of(const Channel& c) {
    return ready_params(c.offset, c.size);  // asserts the range is the protocol's
}

void Choco::after_delayed_mix(Time now, Actions& out) {
    waiting_ = false;
    if (!grad_pending_) {  // the last step's round is mixed: the model is final
        if (t_ >= context().max_steps) out.done = true;
        return;
    }
    grad_pending_ = false;
    worker().apply_gradient(params(), worker().gradient());
    send_round(now, out);  // round t_ = the step just finished (every earlier one is mixed)
    if (sent_ < context().max_steps) {
        out.start_step = true;  // at x after its local step, unmixed: round t travels meanwhile
        return;
    }
    waiting_ = true;
    try_mix(now, out);  // the last round: mixed once its messages are in, then done
}

void Choco::on_message(Time now, Message msg, Actions& out) {
    const int j = msg.sender;
    if (j < 0 || j >= n() || j == rank())
        throw Error(fmt::format("choco: a message from invalid peer {}", j));
    Channel* cp = channel_of(msg);
    if (!cp)
        throw Error(
            fmt::format("choco: a message from peer {} for partition {} chunk {}; this peer "
                        "gossips {} partition(s) in {} channel(s)",
                        j, msg.partition, msg.chunk, index_.partitions(), channels_.size()));
    Channel& c = *cp;
    if (msg.kind == MessageKind::control) {
        answer_resync(now, c, j, msg.edge_seq, out);
        return;
    }
    if (msg.kind != MessageKind::full_model && msg.kind != MessageKind::model_delta)
        throw Error(fmt::format("choco: unexpected {} message from peer {}",
                                transport::to_string(msg.kind), j));
    InEdge& e = c.in[j];
    if (msg.edge_seq < e.next_seq) return;  // superseded by a full replica
    if (msg.kind == MessageKind::model_delta) {
        e.queued.emplace(msg.edge_seq, std::move(msg));
        // Applied as soon as its round has come, even when j is not an in-neighbour of this
        // round (shared replicas on a time-varying graph): the replica stays current.
        advance(c, j, e);
        advance_ready(now, out);  // partition_ready: a ready channel may mix now
        try_mix(now, out);
        return;
    }
    // A full replica numbered S (first contact or a re-sync) supersedes everything up to S,
    // queued or missing, and is taken at once: it touches only the replica, never x.
    if (worker().math() && msg.payload.size() != c.size)
        throw Error(fmt::format("choco: a full model from peer {} has {} values, expected {}", j,
                                msg.payload.size(), c.size));
    e.queued.erase(e.queued.begin(), e.queued.upper_bound(msg.edge_seq));
    take(e.xhat, std::move(msg.payload));
    e.next_seq = msg.edge_seq + 1;
    e.covered = std::max(e.covered, msg.round);
    advance_ready(now, out);
    try_mix(now, out);
}

void Choco::on_send_completed(Time now, std::uint64_t id, bool ok, Actions&) {
    const auto e = in_flight_.take(id);
    if (!e) return;
    const auto [slot, j] = *e;
    if (slot >= channels_.size()) return;
    if (auto e = channels_[slot].out.find(j); e != channels_[slot].out.end())
        e->second.recent.completed(id, now, ok);
}

void Choco::answer_resync(Time now, Channel& c, int j, std::uint64_t seq, Actions& out) {
    // Answered once the requested message's send completed at least resync_timeout ago (or
    // failed): one still in flight is slow, not lost (recent_sends.hpp). Answered even after
    // done, so a neighbour can finish.
    auto it = c.out.find(j);
    if (it == c.out.end() || dead_.contains(j) || seq >= it->second.slot.next_seq) return;
    if (!it->second.recent.answer(seq, now, options_.resync_timeout)) return;
    const Slot& slot = it->second.slot;
    Message m;
    m.kind = MessageKind::full_model;
    m.receiver = j;
    m.partition = c.id;
    m.chunk = c.chunk;
    m.edge_seq = slot.next_seq - 1;
    m.round = slot.last_round;
    m.elements = c.size;
    if (worker().math()) m.payload = payload_of(shared_ ? c.own.xhat : slot.xhat);
    ++resync_answers_;
    send(out, std::move(m));
}

void Choco::on_deadline(Time now, std::uint64_t id, Actions& out) {
    if (id != armed_deadline_ || !waiting_) return;
    for (Channel& c : channels_) {
        if (!due(c)) continue;
        const auto round = context().topology->at(c.round);
        for (int j : round->graph.in_neighbors(rank())) {
            if (dead_.contains(j)) continue;
            const InEdge& e = c.in[j];
            if (e.covered >= c.round) continue;
            ++resync_requests_;
            Message req = resync_request(j, c.id, e.next_seq, c.round);
            req.chunk = c.chunk;
            send(out, std::move(req));
        }
    }
    armed_deadline_ = next_deadline_++;
    out.deadlines.push_back({now + options_.resync_timeout, armed_deadline_});
}

void Choco::on_peer_failed(Time now, int j, Actions& out) {
    if (j == rank() || j < 0 || j >= n()) return;
    dead_.insert(j);
    try_mix(now, out);
}

std::unique_ptr<Protocol> make_choco(const json::Node* options, PeerContext ctx) {
    return std::make_unique<Choco>(std::move(ctx), parse_choco_options(options));
}

}  // namespace gossamer::proto

namespace gossamer::proto {

std::optional<Protocol::NonFinite> Choco::first_non_finite_value(
    const Message& msg, std::span<const float> values) const {
    // Deltas are the words of the codec the header names (codec 0: the channel's compressor).
    if (msg.kind == MessageKind::model_delta)
        if (const auto slot = index_.find(msg.partition, msg.chunk)) {
            const Channel& c = channels_[*slot];
            const optim::Compressor* q = nullptr;
            try {
                q = codecs_.compressor(msg.codec, c.q);
            } catch (const Error&) {
                return std::nullopt;  // a codec this job does not use: on_message refuses it
            }
            return non_finite_in(q, values, c.size);
        }
    return Protocol::first_non_finite_value(msg, values);
}

bool Choco::compressed(const Message& msg) const {
    if (msg.kind != MessageKind::model_delta) return Protocol::compressed(msg);
    const auto slot = index_.find(msg.partition, msg.chunk);
    if (!slot) return true;
    try {
        return codecs_.compressor(msg.codec, channels_[*slot].q) != nullptr;
    } catch (const Error&) {
        return true;  // a codec this job does not use: on_message refuses it
    }
}

}  // namespace gossamer::proto
