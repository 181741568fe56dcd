// The ring all-reduce of allreduce.cpp with compressed payloads and error feedback
// (qallreduce.hpp). A separate protocol rather than an allreduce option: allreduce's zero-copy
// paths borrow and place fp32 values in its buffers, which encoded payloads cannot use, and
// keeping the two apart leaves allreduce's bits and its tests untouched.
#include "gossamer/optimizers/protocols/qallreduce/qallreduce.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocol/ring.hpp"

namespace gossamer::proto {

namespace {

std::span<std::byte> bytes_of(std::vector<float>& words) {
    return std::as_writable_bytes(std::span<float>(words));
}

constexpr std::uint64_t kReduceStream = 1ull << 40, kGatherStream = 2ull << 40;

}  // namespace

QallreduceOptions parse_qallreduce_options(const json::Node* options) {
    QallreduceOptions o;
    if (!options) return o;
    options->expect_object({"compressor", "error_feedback"});
    if (auto c = options->find("compressor")) o.compressor = optim::parse_compressor_config(*c);
    if (auto e = options->find("error_feedback")) o.error_feedback = e->as_bool();
    return o;
}

Qallreduce::Qallreduce(PeerContext ctx, QallreduceOptions options)
    : Protocol(std::move(ctx)),
      options_(options),
      q_(optim::make_compressor(options_.compressor)),
      math_(worker().math()),
      length_(worker().size()),
      steps_(ring::steps(n())) {
    if (worker().device())
        throw ConfigError("", "algorithm", "qallreduce keeps its vectors in host memory",
                          "run qallreduce with parameters on the host, or use allreduce");
    if (math_) {
        err_.assign(length_, 0.0f);
        acc_.assign(length_, 0.0f);
    }
}

optim::CodecKey Qallreduce::key(int k, int sender, int segment) const {
    // Gather payloads are decoded by every peer with the owner's key: name the segment then.
    const bool gather = k >= n() - 1;
    const std::uint64_t stream = gather ? kGatherStream | static_cast<std::uint64_t>(segment)
                                        : kReduceStream | static_cast<std::uint64_t>(sender);
    const std::uint64_t phase_step = gather ? 0 : static_cast<std::uint64_t>(k);
    return {options_.compressor.seed, stream,
            static_cast<std::uint64_t>(round_) * static_cast<std::uint64_t>(n()) + phase_step};
}

Message Qallreduce::header(int k) const {
    const ring::Step s = ring::step(rank(), n(), k);
    const ring::Range r = ring::segment(length_, n(), s.send_segment);
    Message msg;
    msg.kind = MessageKind::reduce;
    msg.receiver = s.send_to;
    msg.round = round_;
    msg.chunk = static_cast<std::uint32_t>(k);
    msg.offset = r.begin;
    msg.codec = static_cast<std::uint8_t>(1 + static_cast<int>(q_->kind()));
    msg.elements = r.size() == 0 ? 0 : q_->encoded_words(r.size());
    return msg;
}

// Sends step k's message: `s` encoded (nothing in cost-only mode or for an empty segment),
// and leaves in `q` what the receiver will decode, Q(s), so that the caller can keep s - Q(s).
void Qallreduce::send_encoded(int k, std::span<const float> s, std::span<float> q, Actions& out) {
    Message msg = header(k);
    msg.edge_seq = edge_seq_++;
    if (math_ && msg.elements > 0) {
        msg.payload.assign(msg.elements, 0.0f);
        const auto key_k = key(k, rank(), ring::step(rank(), n(), k).send_segment);
        q_->encode(s, key_k, bytes_of(msg.payload));
        std::fill(q.begin(), q.end(), 0.0f);
        q_->decode_add(bytes_of(msg.payload), key_k, q);
    }
    send(out, std::move(msg));
}

void Qallreduce::on_start(Time, Actions& out) {
    next_step(out);
}

void Qallreduce::on_step_finished(Time, double, Actions& out) {
    if (done()) return;
    ++steps_finished_;
    if (math_) {
        const auto g = worker().gradient();
        if (!options_.error_feedback) std::fill(err_.begin(), err_.end(), 0.0f);
        for (std::size_t i = 0; i < length_; ++i) err_[i] += g[i];  // u = g + e
    }
    if (steps_ == 0) {  // one peer: nothing to compress
        if (math_) worker().apply_gradient(params(), err_);
        if (math_) std::fill(err_.begin(), err_.end(), 0.0f);
        ++mutable_stats().rounds;
        ++round_;
        return next_step(out);
    }
    active_ = true;
    next_ = 0;
    // Step 0: this peer's own segment u as it is; its error is u - Q(u).
    const ring::Range r = ring::segment(length_, n(), ring::step(rank(), n(), 0).send_segment);
    const auto u = math_ ? std::span<float>(err_).subspan(r.begin, r.size()) : std::span<float>{};
    dense_.assign(u.size(), 0.0f);
    send_encoded(0, u, dense_, out);
    for (std::size_t i = 0; i < u.size(); ++i) u[i] -= dense_[i];
    progress(out);
}

void Qallreduce::on_message(Time, Message msg, Actions& out) {
    if (done()) return;
    const auto bad = [&](const std::string& what) {
        throw Error(
            fmt::format("qallreduce: rank {} got a bad message from rank {} (round {}, "
                        "step {}): {}",
                        rank(), msg.sender, msg.round, msg.chunk, what));
    };
    const int from = (rank() + n() - 1) % n();
    if (msg.kind != MessageKind::reduce) bad("kind is not reduce");
    if (steps_ == 0 || msg.sender != from) bad(fmt::format("only rank {} sends here", from));
    if (msg.round < round_) bad(fmt::format("round {} is over", msg.round));
    if (msg.chunk >= static_cast<std::uint32_t>(steps_)) bad("step past the schedule");
    const int k = static_cast<int>(msg.chunk);
    const ring::Range r = ring::segment(length_, n(), ring::step(rank(), n(), k).recv_segment);
    const std::size_t words = r.size() == 0 ? 0 : q_->encoded_words(r.size());
    if (msg.offset != r.begin || msg.elements != words)
        bad(fmt::format("expected {} words at element {}", words, r.begin));
    if (msg.payload.size() != (math_ ? words : 0)) bad("payload size");
    if (!pending_.emplace(std::make_pair(msg.round, k), std::move(msg)).second)
        bad("received twice");
    if (active_) progress(out);
}

void Qallreduce::progress(Actions& out) {
    while (active_ && next_ < steps_) {
        const auto it = pending_.find({round_, next_});
        if (it == pending_.end()) return;
        Message msg = std::move(it->second);
        pending_.erase(it);
        const int k = next_++;
        const ring::Step s = ring::step(rank(), n(), k);
        const ring::Range r = ring::segment(length_, n(), s.recv_segment);
        const bool more = k + 1 < steps_;
        if (!math_ || r.size() == 0) {
            if (more) {
                Message m = header(k + 1);
                m.edge_seq = edge_seq_++;
                send(out, std::move(m));
            }
            continue;
        }
        const auto in = bytes_of(msg.payload);
        const auto acc = std::span<float>(acc_).subspan(r.begin, r.size());
        if (!s.reduce) {  // all-gather: the owner's bytes, decoded and forwarded unchanged
            std::fill(acc.begin(), acc.end(), 0.0f);
            q_->decode_add(in, key(k, msg.sender, s.recv_segment), acc);
            if (more) {
                Message m = header(k + 1);
                m.edge_seq = edge_seq_++;
                m.payload = std::move(msg.payload);
                send(out, std::move(m));
            }
            continue;
        }
        // Reduce-scatter: s = partial + u in dense_, then Q(s) onwards and e = s - Q(s).
        dense_.assign(r.size(), 0.0f);
        q_->decode_add(in, key(k, msg.sender, s.recv_segment), dense_);
        const auto u = std::span<float>(err_).subspan(r.begin, r.size());
        for (std::size_t i = 0; i < r.size(); ++i) dense_[i] += u[i];
        const bool owner = k == n() - 2;
        const float div = static_cast<float>(n());
        if (owner)
            for (float& v : dense_) v /= div;
        send_encoded(k + 1, dense_, acc, out);  // acc: Q(s), the owner's Q(s / n)
        for (std::size_t i = 0; i < r.size(); ++i)
            u[i] = owner ? (dense_[i] - acc[i]) * div : dense_[i] - acc[i];
    }
    if (!active_ || next_ < steps_) return;
    active_ = false;
    ++round_;
    ++mutable_stats().rounds;
    if (math_) {
        worker().apply_gradient(params(), acc_);
        if (!options_.error_feedback) std::fill(err_.begin(), err_.end(), 0.0f);
    }
    next_step(out);
}

void Qallreduce::on_peer_failed(Time, int dead, Actions& out) {
    if (done()) return;
    failed_rank_ = dead;
    pending_.clear();
    active_ = false;
    out.done = true;
}

void Qallreduce::next_step(Actions& out) {
    if (steps_finished_ >= context().max_steps)
        out.done = true;
    else
        out.start_step = true;
}

std::unique_ptr<Protocol> make_qallreduce(const json::Node* options, PeerContext ctx) {
    return std::make_unique<Qallreduce>(std::move(ctx), parse_qallreduce_options(options));
}

}  // namespace gossamer::proto
