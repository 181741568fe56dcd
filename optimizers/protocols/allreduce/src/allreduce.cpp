#include "gossamer/optimizers/protocols/allreduce/allreduce.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocol/device.hpp"
#include "gossamer/optimizers/protocol/ring.hpp"
#include "gossamer/optimizers/protocols/allreduce/hierarchical.hpp"

namespace gossamer::proto {

namespace {

constexpr int kMaxChunks = 65536;

}  // namespace

AllreduceOptions parse_allreduce_options(const json::Node* options) {
    AllreduceOptions o;
    if (!options) return o;
    options->expect_object(
        {"period", "chunks", "elastic", "checkpoint_every", "restart_seconds", "hierarchy"});
    if (auto p = options->find("period")) o.period = static_cast<int>(p->as_int(1, INT32_MAX));
    if (auto c = options->find("chunks")) o.chunks = static_cast<int>(c->as_int(1, kMaxChunks));
    if (auto e = options->find("elastic")) {
        const std::string v = e->as_enum({"stop", "rebuild", "restart"});
        o.elastic = v == "rebuild"   ? AllreduceOptions::Elastic::rebuild
                    : v == "restart" ? AllreduceOptions::Elastic::restart
                                     : AllreduceOptions::Elastic::stop;
    }
    if (auto k = options->find("checkpoint_every")) o.checkpoint_every = k->as_int(1, INT64_MAX);
    if (auto r = options->find("restart_seconds")) {
        o.restart_seconds = r->as_double();
        if (o.restart_seconds < 0 || o.restart_seconds > 1e6)
            r->fail(fmt::format("{} is out of range", o.restart_seconds), "use 0 to 1e6 seconds");
    }
    const bool restart = o.elastic == AllreduceOptions::Elastic::restart;
    for (const char* key : {"checkpoint_every", "restart_seconds"})
        if (auto k = options->find(key); k && !restart)
            k->fail("applies to \"elastic\": \"restart\" only",
                    "add \"elastic\": \"restart\" or drop the key");
    if (auto h = options->find("hierarchy")) {
        h->expect_object({"rack_size"});
        o.rack_size = static_cast<int>(h->at("rack_size").as_int(1, INT32_MAX));
        for (const char* key : {"chunks", "elastic"})
            if (auto k = options->find(key))
                k->fail(
                    "the rack-aware all-reduce (\"hierarchy\") runs with one chunk per "
                    "segment and no elastic mode",
                    fmt::format("drop \"{}\" or \"hierarchy\"", key));
    }
    return o;
}

AllreduceProtocol::AllreduceProtocol(PeerContext ctx, AllreduceOptions options)
    : Protocol(std::move(ctx)),
      options_(options),
      math_(worker().math()),
      length_(worker().size()),
      steps_(ring::steps(n())),
      device_(worker().device()),
      alive_(static_cast<std::size_t>(n()), 1) {
    if (options_.period < 1)
        throw ConfigError("", "period", fmt::format("{} is out of range", options_.period),
                          "use a value >= 1");
    if (options_.chunks < 1 || options_.chunks > kMaxChunks)
        throw ConfigError("", "chunks", fmt::format("{} is out of range", options_.chunks),
                          fmt::format("use a value from 1 to {}", kMaxChunks));
    std::vector<int> all(static_cast<std::size_t>(n()));
    for (int r = 0; r < n(); ++r) all[static_cast<std::size_t>(r)] = r;
    set_ring(std::move(all));
    if (math_ && device_) {
        dacc_ = DeviceVector(*device_, length_);
    } else if (math_) {
        acc_.resize(length_);
    }
}

std::span<const float> AllreduceProtocol::compute_point() {
    // Called while the step runs, so not through params(): reading x is what the step does.
    return context().worker->params();
}

void AllreduceProtocol::current_model(std::span<float> out) const {
    assert(out.size() == length_);
    copy_params_to(out);
}

void AllreduceProtocol::on_start(Time now, Actions& out) {
    now_ = now;
    if (options_.elastic == AllreduceOptions::Elastic::restart) {
        checkpoint_ = pack_state();  // a change before the first checkpoint restarts from here
        checkpoint_step_ = worker().steps();
    }
    next_step(out);
}

void AllreduceProtocol::on_step_finished(Time now, double, Actions& out) {
    now_ = now;
    if (done()) return;  // a failure stopped this peer while the step ran
    ++steps_finished_;
    if (elastic() && syncing_) return step_after_change(out);
    if (averages_gradients()) {
        begin_allreduce(worker().gradient(), out);
        return;
    }
    // Local SGD: the peer's own step, then a model average every period steps and at the end.
    worker().apply_gradient(params(), worker().gradient());
    if (steps_finished_ % options_.period == 0 || steps_finished_ >= context().max_steps)
        begin_allreduce(params(), out);
    else
        next_step(out);
}

void AllreduceProtocol::on_message(Time now, Message msg, Actions& out) {
    now_ = now;
    if (elastic() && msg.kind != MessageKind::reduce) return on_control(now, msg, out);
    if (done()) return;
    // Elastic modes: the ring a reduce message belongs to travels in its weight.
    const auto ring_key = elastic() ? static_cast<std::int64_t>(msg.weight) : 0;
    if (ring_key < key_ || (ring_key == key_ && syncing_)) return;  // an abandoned ring's
    if (ring_key == key_) check(msg);  // a later ring's is checked once it is installed
    const auto key = std::make_tuple(ring_key, msg.round, msg.chunk);
    if (!pending_.emplace(key, std::move(msg)).second)
        throw Error(fmt::format("allreduce: rank {} received message {} of round {} twice", rank(),
                                std::get<2>(key), std::get<1>(key)));
    if (active_) progress(out);
}

void AllreduceProtocol::on_peer_failed(Time now, int dead, Actions& out) {
    if (elastic()) return lost(now, dead, out);
    if (done()) return;  // finished before the failure: the result stands
    failed_rank_ = dead;
    pending_.clear();
    active_ = false;
    out.done = true;
}

void AllreduceProtocol::begin_allreduce(std::span<const float> local, Actions& out) {
    // Host memory: no copy of the input. Step 0 sends its chunks from `local`, each reduction
    // reads `local` (every segment is reduced at most once per rank), and acc_ is written once
    // per element, by the owner's average or by the all-gather (see absorb()).
    local_ = local;
    if (math_ && device_) {
        device_->copy(dacc_.data(), local.data(), length_);
    } else if (math_ && steps_ == 0) {
        std::copy(local.begin(), local.end(), acc_.begin());
    }
    active_ = true;
    next_.assign(static_cast<std::size_t>(options_.chunks), 0);
    if (steps_ > 0)
        for (int c = 0; c < options_.chunks; ++c) send_chunk(0, c, out);
    progress(out);
}

Message AllreduceProtocol::header(int k, int c) {
    const ring::Step s = ring::step(pos_, m(), k);
    const ring::Range r = ring::chunk(length_, m(), s.send_segment, options_.chunks, c);
    Message msg;
    msg.kind = MessageKind::reduce;
    msg.receiver = members_[static_cast<std::size_t>(s.send_to)];
    msg.weight = static_cast<double>(key_);  // the ring (elastic modes; 0 otherwise)
    msg.edge_seq = edge_seq_++;
    msg.round = round_;
    msg.chunk = static_cast<std::uint32_t>(k * options_.chunks + c);
    msg.offset = r.begin;
    msg.elements = r.size();
    return msg;
}

void AllreduceProtocol::send_chunk(int k, int c, Actions& out) {
    Message msg = header(k, c);
    if (math_ && !device_ && zc() && k == 0) {
        // Zero-copy driver: the transport reads the input itself (kept until the send is done).
        const std::span<const float> values = local_.subspan(msg.offset, msg.elements);
        lent_.insert(send_borrowed(out, std::move(msg), values));
        return;
    }
    if (math_) {
        // A payload absorbed earlier lends its memory: no allocation and no page faults per
        // message once the first round has run (at n = 2 and 64 MiB these doubled the time).
        if (!spare_.empty()) {
            msg.payload = std::move(spare_.back());
            spare_.pop_back();
        }
        const std::size_t m = msg.elements;
        if (device_) {
            msg.payload.resize(m);
            device_->download(msg.payload, dacc_.data() + msg.offset);
        } else {
            // Host memory: only step 0 copies (from the input); later steps forward the
            // received payload itself (progress()).
            const float* src = (k == 0 ? local_.data() : acc_.data()) + msg.offset;
            msg.payload.assign(src, src + m);
        }
    }
    send(out, std::move(msg));
}

std::span<float> AllreduceProtocol::receive_into(const Message& h) {
    // Only all-gather chunks of the running all-reduce and the last reduce-scatter step (the
    // partial sum of this peer's own segment, completed and averaged in place): their place in
    // acc_ is written once per round and read only after the last chunk is delivered. Anything
    // else (early, late, malformed) gets a buffer of its own and meets check() when delivered.
    if (!zc() || !math_ || device_ || !active_ || done()) return {};
    if (h.kind != MessageKind::reduce || h.round != round_ || h.sender != prev()) return {};
    if (h.chunk >= static_cast<std::uint32_t>(steps_ * options_.chunks)) return {};
    const int k = static_cast<int>(h.chunk) / options_.chunks;
    const int c = static_cast<int>(h.chunk) % options_.chunks;
    const ring::Step s = ring::step(pos_, m(), k);
    if ((s.reduce && k != m() - 2) || k < next_[static_cast<std::size_t>(c)]) return {};
    const ring::Range r = ring::chunk(length_, m(), s.recv_segment, options_.chunks, c);
    if (h.offset != r.begin || h.elements != r.size()) return {};
    return std::span<float>(acc_).subspan(r.begin, r.size());
}

std::span<const float> AllreduceProtocol::placed_values(const Message& msg) const {
    // check() refuses a placed message whose range is not the one receive_into gave.
    if (msg.offset > acc_.size() || msg.elements > acc_.size() - msg.offset) return {};
    return std::span<const float>(acc_).subspan(msg.offset, msg.elements);
}

void AllreduceProtocol::on_send_completed(Time now, std::uint64_t id, bool, Actions& out) {
    now_ = now;
    // A failed send is followed by peer_failed, which stops this peer.
    if (lent_.erase(id) == 0 || !lent_.empty() || !finishing_ || done()) return;
    finish_allreduce(out);
}

void AllreduceProtocol::check(const Message& msg) const {
    const auto bad = [&](const std::string& what) {
        throw Error(
            fmt::format("allreduce: rank {} got a bad message from rank {} (round {}, "
                        "chunk {}): {}",
                        rank(), msg.sender, msg.round, msg.chunk, what));
    };
    if (msg.kind != MessageKind::reduce) bad("kind is not reduce");
    const int from = prev();
    if (steps_ == 0 || msg.sender != from) bad(fmt::format("only rank {} sends here", from));
    if (msg.round < round_) bad(fmt::format("round {} is over", msg.round));
    const auto total = static_cast<std::uint32_t>(steps_ * options_.chunks);
    if (msg.chunk >= total) bad(fmt::format("chunk index past {}", total));
    const int k = static_cast<int>(msg.chunk) / options_.chunks;
    const int c = static_cast<int>(msg.chunk) % options_.chunks;
    const ring::Step s = ring::step(pos_, m(), k);
    const ring::Range r = ring::chunk(length_, m(), s.recv_segment, options_.chunks, c);
    if (msg.offset != r.begin || msg.elements != r.size())
        bad(fmt::format("expected elements [{}, {})", r.begin, r.end));
    const std::size_t values = math_ && !msg.placed ? r.size() : 0;
    if (msg.payload.size() != values) bad(fmt::format("expected {} payload values", values));
    if (msg.placed && (!zc() || (s.reduce && k != m() - 2)))
        bad("placed where this peer did not ask");
}

void AllreduceProtocol::absorb(Message& msg) {
    const int k = static_cast<int>(msg.chunk) / options_.chunks;
    next_[msg.chunk % static_cast<std::uint32_t>(options_.chunks)] = k + 1;
    if (!math_) return;
    const ring::Step s = ring::step(pos_, m(), k);
    if (device_) return absorb_on_device(msg, s.reduce && k == m() - 2, s.reduce);
    // Host memory. The segment received at step k is the one sent at step k + 1, so the
    // reduction happens in the received payload, which progress() then forwards as it is.
    float* a = acc_.data() + msg.offset;
    float* v = msg.payload.data();
    const std::size_t len = msg.payload.size();
    if (!s.reduce) {
        if (!msg.placed) std::copy(v, v + len, a);  // placed: it is in acc_ already
        return;
    }
    // Every segment is reduced once per rank: the other partial sum is this rank's input.
    const float* l = local_.data() + msg.offset;
    // The last reduce-scatter step completes this peer's owned segment: its owner alone divides,
    // and the all-gather hands out exactly these bytes. (One pass: the same two roundings.)
    if (k == m() - 2) {
        const auto div = static_cast<float>(m());
        if (msg.placed) {  // the partial sum landed in acc_: average it there, forward from there
            for (std::size_t i = 0; i < msg.elements; ++i) a[i] = (a[i] + l[i]) / div;
            return;
        }
        for (std::size_t i = 0; i < len; ++i) a[i] = v[i] = (v[i] + l[i]) / div;
        return;
    }
    // A partial sum: only the next rank needs it (acc_ gets the final value in the all-gather).
    for (std::size_t i = 0; i < len; ++i) v[i] = v[i] + l[i];
}

// absorb() with the buffer on the device: the same two roundings (sum, then the division).
void AllreduceProtocol::absorb_on_device(const Message& msg, bool average, bool reduce) {
    float* a = dacc_.data() + msg.offset;
    if (!reduce) return device_->upload(a, msg.payload);
    device_->upload_add(a, msg.payload);
    if (average) device_->divide(a, static_cast<float>(m()), msg.payload.size());
}

void AllreduceProtocol::progress(Actions& out) {
    // Each chunk moves on its own as soon as its next message is here (pipelining).
    for (bool moved = true; moved;) {
        moved = false;
        for (int c = 0; c < options_.chunks; ++c) {
            const int k = next_[static_cast<std::size_t>(c)];
            if (k >= steps_) continue;
            const auto it =
                pending_.find({key_, round_, static_cast<std::uint32_t>(k * options_.chunks + c)});
            if (it == pending_.end()) continue;
            absorb(it->second);
            if (k + 1 < steps_ && it->second.placed) {
                // A placed all-gather chunk is forwarded from acc_, where it landed.
                Message msg = header(k + 1, c);
                const auto values = std::span<const float>(acc_).subspan(msg.offset, msg.elements);
                lent_.insert(send_borrowed(out, std::move(msg), values));
            } else if (k + 1 < steps_ && math_ && !device_) {
                // Forward the payload absorb() left holding what the next rank needs.
                Message msg = header(k + 1, c);
                msg.payload = std::move(it->second.payload);
                send(out, std::move(msg));
            } else {
                if (!it->second.placed && spare_.size() < static_cast<std::size_t>(options_.chunks))
                    spare_.push_back(std::move(it->second.payload));
                if (k + 1 < steps_) send_chunk(k + 1, c, out);
            }
            pending_.erase(it);
            moved = true;
        }
    }
    if (std::all_of(next_.begin(), next_.end(), [&](int k) { return k >= steps_; }))
        finish_allreduce(out);
}

void AllreduceProtocol::finish_allreduce(Actions& out) {
    active_ = false;
    // Zero-copy: the transport may still read the input or acc_; neither changes until then.
    finishing_ = !lent_.empty();
    if (finishing_) return;
    ++round_;
    ++mutable_stats().rounds;
    if (averages_gradients()) {
        worker().apply_gradient(params(), device_ ? std::span<const float>(dacc_.span())
                                                  : std::span<const float>(acc_));
    } else if (math_ && device_) {
        device_->copy(params().data(), dacc_.data(), length_);
    } else if (math_) {
        auto x = params();
        std::copy(acc_.begin(), acc_.end(), x.begin());
    }
    next_step(out);
}

void AllreduceProtocol::next_step(Actions& out) {
    cut(steps_finished_);  // between all-reduces: nothing of the next one taken
                           // (allreduce_state.cpp)
    if (elastic() && at_boundary(out)) return;  // allreduce_elastic.cpp
    if (steps_finished_ >= context().max_steps)
        out.done = true;
    else
        out.start_step = true;
}

std::unique_ptr<Protocol> make_allreduce(const json::Node* options, PeerContext ctx) {
    const AllreduceOptions o = parse_allreduce_options(options);
    if (o.rack_size > 0 && ctx.n % o.rack_size != 0)  // named with the file and its JSON path
        options->at("hierarchy")
            .at("rack_size")
            .fail(fmt::format("rack size {} does not divide the {} peers", o.rack_size, ctx.n),
                  "racks are rack_size consecutive ranks: use a divisor of n (e.g. 8 for 1,024 "
                  "peers)");
    if (o.rack_size > 0) return std::make_unique<HierarchicalAllreduce>(std::move(ctx), o);
    return std::make_unique<AllreduceProtocol>(std::move(ctx), o);
}

}  // namespace gossamer::proto
