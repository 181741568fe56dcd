#include "gossamer/optimizers/protocol/protocol.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cmath>

#include "gossamer/core/error.hpp"
#include "gossamer/core/finite.hpp"
#include "gossamer/optimizers/protocol/device.hpp"
#include "gossamer/optimizers/protocol/questions.hpp"

namespace gossamer::proto {

Protocol::Protocol(PeerContext ctx) : ctx_(std::move(ctx)) {
    if (!ctx_.worker) throw Error("a protocol needs a local worker");
    if (ctx_.n < 1 || ctx_.rank < 0 || ctx_.rank >= ctx_.n) throw Error("rank out of range");
}

void Protocol::start(Time now, Actions& out) {
    event_time_ = now;
    measure_own_scale();
    on_start(now, out);
    after(out);
}

void Protocol::step_finished(Time now, double loss, Actions& out) {
    event_time_ = now;
    assert(stepping_ && "step_finished without a running step");
    check_ready_unchanged();
    stepping_ = false;
    if (!std::isfinite(loss))
        throw Diverged(fmt::format(
            "rank {}: the training loss became {} at step {}; this peer stops, sends nothing more "
            "and writes no result (lower optimizer.lr, add a warm-up or gradient clipping)",
            ctx_.rank, std::isnan(loss) ? "NaN" : "infinite", ctx_.worker->steps()));
    measure_own_scale();  // x is the protocol's now: the scale of the value bound
    on_step_finished(now, loss, out);
    after(out);
}

void Protocol::message_arrived(Time now, Message msg, Actions& out) {
    event_time_ = now;
    ++stats_.messages_received;
    stats_.bytes_received += msg.wire_bytes();
    if (refused_peer(msg.sender)) {
        ++stats_.messages_refused;  // from a peer refused before: it counts as failed
        return after(out);
    }
    if (std::string bad = non_finite_value(msg); !bad.empty()) {
        ++stats_.messages_refused;
        const int j = msg.sender;
        refused_.insert(std::upper_bound(refused_.begin(), refused_.end(), j), j);
        out.refused.push_back(Refusal{j, msg.kind, msg.round, msg.partition, std::move(bad)});
        // The sender is treated as failed: its weight goes to this peer's own, the all-reduce
        // stops or rebuilds per its policy (a done protocol that settled waits for nothing).
        if (!done_ || !settled()) on_peer_failed(now, j, out);
        return after(out);
    }
    on_message(now, std::move(msg), out);
    after(out);
}

std::optional<Protocol::NonFinite> Protocol::first_non_finite_value(
    const Message& msg, std::span<const float> values) const {
    if (msg.codec != 0) return std::nullopt;  // a codec's words are not floats
    return non_finite_in(nullptr, values, values.size());
}

std::optional<Protocol::NonFinite> Protocol::non_finite_in(const optim::Compressor* q,
                                                           std::span<const float> values,
                                                           std::size_t n) {
    if (q) {
        const auto bad = q->first_non_finite(std::as_bytes(values), n);
        if (!bad) return std::nullopt;
        return NonFinite{bad->first, bad->second};
    }
    const auto k = first_non_finite(values);
    if (!k) return std::nullopt;
    return NonFinite{*k, values[*k]};
}

std::string Protocol::non_finite_value(const Message& msg) const {
    if (msg.kind == MessageKind::control) return "";
    if (msg.sender < 0 || msg.sender >= ctx_.n) return "";  // the protocol refuses it itself
    const std::span<const float> v =
        msg.placed ? placed_values(msg) : std::span<const float>(msg.payload);
    const auto bad = first_non_finite_value(msg, v);
    if (bad)
        return fmt::format("{} at element {} of partition {}", non_finite_name(bad->value),
                           msg.offset + bad->index, msg.partition);
    // The optional bound: model values (not gradients, not codec words) far beyond this peer's
    // own are a runaway neighbour's, refused before they are mixed in.
    const bool model_values = msg.kind == MessageKind::full_model ||
                              msg.kind == MessageKind::model_delta ||
                              msg.kind == MessageKind::mass_share;
    if (ctx_.value_bound <= 0 || !model_values || compressed(msg)) return "";
    const auto k = largest_magnitude(v);
    const double limit = ctx_.value_bound * own_scale_;
    if (!k || !(std::fabs(v[*k]) > limit)) return "";
    return fmt::format(
        "{:g} at element {} of partition {}, beyond the value bound {:g} x {:g} "
        "(guard.value_bound x this peer's largest |x|, at least 1)",
        v[*k], msg.offset + *k, msg.partition, ctx_.value_bound, own_scale_);
}

void Protocol::measure_own_scale() {
    if (ctx_.value_bound <= 0 || !ctx_.worker->math() || ctx_.worker->device()) return;
    const auto x = ctx_.worker->params();
    const auto k = largest_magnitude(x);
    own_scale_ = std::max(1.0, k ? static_cast<double>(std::fabs(x[*k])) : 0.0);
}

void Protocol::check_outgoing(const Message& msg, std::span<const float> values) const {
    if (msg.kind == MessageKind::control || values.empty()) return;
    const auto bad = first_non_finite_value(msg, values);
    if (!bad) return;
    throw Diverged(fmt::format(
        "rank {}: its own model became non-finite: the {} it was about to send to rank {} holds "
        "{} at element {} of partition {} (round {}); this peer stops, sends nothing more and "
        "writes no result (lower optimizer.lr, add a warm-up or gradient clipping)",
        ctx_.rank, transport::to_string(msg.kind), msg.receiver, non_finite_name(bad->value),
        msg.offset + bad->index, msg.partition, msg.round));
}

void Protocol::send_completed(Time now, std::uint64_t id, bool ok, Actions& out, Time done_at) {
    event_time_ = now;
    // After its last step a peer only drains what is left, to receivers that finish too and
    // stop pacing their side: those completions would time the end of the job, not the link.
    if (done_)
        speeds_.forget(id);
    else
        speeds_.completed(id, done_at >= 0 && done_at <= now ? done_at : now, ok);
    on_send_completed(now, id, ok, out);
    after(out);
}

void Protocol::deadline_reached(Time now, std::uint64_t id, Actions& out) {
    event_time_ = now;
    on_deadline(now, id, out);
    after(out);
}

void Protocol::peer_failed(Time now, int rank, Actions& out) {
    if (refused_peer(rank)) return;  // taken as failed when its message was refused
    event_time_ = now;
    on_peer_failed(now, rank, out);
    after(out);
}

std::string Protocol::elastic_refusal() const {
    return proto::elastic_refusal(name());
}

void Protocol::peer_absent(int rank) {
    if (rank < 0 || rank >= ctx_.n || rank == ctx_.rank)
        throw Error(fmt::format("peer_absent: rank {} is out of range or this peer", rank));
    on_peer_absent(rank);
}

void Protocol::join(Time now, Entry entry, Actions& out) {
    event_time_ = now;
    joining_ = true;
    on_join(now, entry, out);
    after(out);
}

void Protocol::leave(Time now, Actions& out) {
    event_time_ = now;
    on_leave(now, out);
    after(out);
}

void Protocol::on_join(Time, Entry, Actions&) {
    throw Error(elastic_refusal());
}

void Protocol::on_leave(Time, Actions&) {
    throw Error(elastic_refusal());
}

std::span<float> Protocol::params() {
    // The ownership rule: while a step runs, the compute side owns x.
    assert(!stepping_ && "a protocol touched x while a local step was running");
    return ctx_.worker->params();
}

void Protocol::copy_params_to(std::span<float> out) const {
    const auto x = ctx_.worker->params();
    if (Device* d = ctx_.worker->device()) return d->download(out.first(x.size()), x.data());
    std::copy(x.begin(), x.end(), out.begin());
}

void Protocol::send(Actions& out, Message msg) {
    check_outgoing(msg, msg.payload);
    msg.sender = ctx_.rank;
    ++stats_.messages_sent;
    stats_.bytes_sent += msg.wire_bytes();
    if (msg.partition >= stats_.partition_bytes_sent.size())
        stats_.partition_bytes_sent.resize(msg.partition + std::size_t{1}, 0);
    stats_.partition_bytes_sent[msg.partition] += msg.wire_bytes();
    speeds_.posted(next_send_id_, msg.receiver, msg.wire_bytes(), event_time_);
    out.sends.push_back(Send{std::move(msg), next_send_id_++});
}

void ChannelIndex::add(const PartitionChannel& c, std::size_t slot) {
    if (c.chunk == 0) {
        first_.push_back(slot);
        count_.push_back(0);
    }
    ++count_.back();
}

std::optional<std::size_t> ChannelIndex::find(std::uint32_t partition, std::uint32_t chunk) const {
    if (partition >= first_.size() || chunk >= count_[partition]) return std::nullopt;
    return first_[partition] + chunk;
}

std::uint64_t Protocol::send_borrowed(Actions& out, Message msg, std::span<const float> values) {
    assert(zero_copy_ && msg.payload.empty() && values.size() == msg.elements);
    check_outgoing(msg, values);
    send(out, std::move(msg));
    out.sends.back().borrowed = values;
    return out.sends.back().id;
}

void Protocol::after(Actions& out) {
    if (out.start_step) {
        assert(!stepping_ && "start_step while a step is running");
        stepping_ = true;
        std::fill(ready_.begin(), ready_.end(), 0);  // a new step: nothing declared yet
    }
    done_ = done_ || out.done;
}

std::vector<PartitionChannel> partition_channels(const LocalWorker& worker,
                                                 std::uint64_t chunk_values) {
    std::vector<PartitionChannel> out;
    const optim::Multirate* rates = worker.multirate();
    // One partition [offset, offset + size), cut into chunks of at most chunk_values values.
    const auto add = [&](std::uint32_t id, std::size_t offset, std::size_t size, int period,
                         int phase, const auto& make_q) {
        const std::size_t step = chunk_values > 0 ? chunk_values : std::max<std::size_t>(size, 1);
        std::uint32_t k = 0;
        for (std::size_t begin = 0; begin < size || (size == 0 && k == 0); begin += step, ++k) {
            PartitionChannel& c = out.emplace_back();
            c.id = id;
            c.chunk = k;
            c.offset = offset + begin;
            c.size = std::min(step, size - begin);
            c.period = period;
            c.phase = phase;
            c.compressor = make_q();
        }
    };
    if (!rates) {
        add(0, 0, worker.size(), 1, 0, [] { return std::unique_ptr<optim::Compressor>{}; });
        return out;
    }
    for (std::size_t id = 0; id < rates->count(); ++id) {
        const Partition& p = rates->layout()[id];
        const auto& q = rates->rate(id).compressor;
        if (q && worker.device())
            optim::check_device_codec(*q, fmt::format("partitions.{}.compressor", p.name));
        add(static_cast<std::uint32_t>(id), p.offset, p.size, rates->rate(id).gossip_period,
            rates->rate(id).gossip_offset,
            [&] { return q ? optim::make_compressor(*q) : std::unique_ptr<optim::Compressor>{}; });
    }
    return out;
}

}  // namespace gossamer::proto
