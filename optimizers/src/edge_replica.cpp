#include "gossamer/optimizers/edge_replica.hpp"

#include <algorithm>
#include <cassert>

#include "gossamer/core/error.hpp"

namespace gossamer::proto {

transport::Message resync_request(int receiver, std::uint32_t partition, std::uint64_t expected_seq,
                                  std::int64_t round) {
    transport::Message req;
    req.kind = transport::MessageKind::control;
    req.receiver = receiver;
    req.partition = partition;
    req.edge_seq = expected_seq;
    req.round = round;
    return req;
}

using transport::Message;
using transport::MessageKind;

namespace {

std::span<std::byte> bytes_of(std::vector<float>& words) {
    return std::as_writable_bytes(std::span<float>(words));
}

}  // namespace

ReplicaSender::ReplicaSender(int receiver, std::size_t size, bool math, const optim::Compressor* q,
                             std::uint64_t stream)
    : receiver_(receiver), size_(size), math_(math), q_(q), stream_(stream) {}

Message ReplicaSender::encode(std::span<const float> x, std::int64_t round) {
    Message m;
    m.receiver = receiver_;
    m.edge_seq = next_seq_++;
    m.round = round;
    m.elements = size_;
    last_round_ = round;
    // First contact sends the model itself rather than a delta against zeros: the same values,
    // but the receiver can take it through the one full-model path that re-syncs also use.
    const bool first = replica_.empty();
    m.kind = first ? MessageKind::full_model : MessageKind::model_delta;
    if (!first && q_) m.elements = q_->encoded_words(size_);
    if (!math_) return m;
    assert(x.size() == size_);
    if (first) {
        replica_.assign(x.begin(), x.end());
        m.payload = replica_;
        return m;
    }
    if (q_) {
        scratch_.resize(size_);
        for (std::size_t k = 0; k < size_; ++k) scratch_[k] = x[k] - replica_[k];
        m.payload.resize(m.elements);
        const optim::CodecKey key{0, stream_, m.edge_seq};
        q_->encode(scratch_, key, bytes_of(m.payload));
        // x_hat moves by the decoded message, exactly as the receiver's copy will.
        q_->decode_add(std::as_bytes(std::span<const float>(m.payload)), key, replica_);
        return m;
    }
    m.payload.resize(size_);
    // x_hat moves by the very float delta that travels, so both replicas stay bit-identical.
    for (std::size_t k = 0; k < size_; ++k) {
        m.payload[k] = x[k] - replica_[k];
        replica_[k] += m.payload[k];
    }
    return m;
}

Message ReplicaSender::resync() const {
    if (next_seq_ == 0) throw Error("re-sync on an edge that has carried nothing");
    Message m;
    m.kind = MessageKind::full_model;
    m.receiver = receiver_;
    m.edge_seq = next_seq_ - 1;
    m.round = last_round_;
    m.elements = size_;
    if (math_) m.payload = replica_;
    return m;
}

ReplicaReceiver::ReplicaReceiver(int sender, std::size_t size, bool math,
                                 const optim::Compressor* q, std::uint64_t stream)
    : sender_(sender), size_(size), math_(math), q_(q), stream_(stream) {}

bool ReplicaReceiver::gap_open() const noexcept {
    return !queued_.empty() && queued_.begin()->first != next_seq_;
}

void ReplicaReceiver::accept(Message msg) {
    if (msg.edge_seq < next_seq_) {
        ++stale_;  // already covered by a full model
        return;
    }
    if (msg.kind == MessageKind::full_model) {
        // A full model supersedes everything numbered up to it, queued or still missing.
        if (msg.edge_seq != 0 || next_seq_ != 0) ++resyncs_;
        const std::uint64_t seq = msg.edge_seq;
        stale_ +=
            static_cast<std::uint64_t>(std::distance(queued_.begin(), queued_.upper_bound(seq)));
        queued_.erase(queued_.begin(), queued_.upper_bound(seq));
        apply(msg);
        return;
    }
    // Everything queued is numbered at or past next_seq_, so a non-empty queue either holds the
    // expected message or already counted its gap.
    if (msg.edge_seq > next_seq_ && queued_.empty()) ++gaps_;
    queued_.emplace(msg.edge_seq, std::move(msg));
}

void ReplicaReceiver::advance(std::int64_t round) {
    for (auto it = queued_.begin(); it != queued_.end() && it->first == next_seq_;
         it = queued_.begin()) {
        if (it->second.round > round) break;
        apply(it->second);
        queued_.erase(it);
    }
}

void ReplicaReceiver::apply(const Message& msg) {
    if (math_ && q_ && msg.kind == MessageKind::model_delta) {
        if (msg.payload.size() != q_->encoded_words(size_))
            throw Error("a compressed delta from peer " + std::to_string(sender_) + " carries " +
                        std::to_string(msg.payload.size()) + " words, expected " +
                        std::to_string(q_->encoded_words(size_)));
        assert(replica_.size() == size_ && "a delta before any full model");
        q_->decode_add(std::as_bytes(std::span<const float>(msg.payload)),
                       optim::CodecKey{0, stream_, msg.edge_seq}, replica_);
    } else if (math_) {
        if (msg.payload.size() != size_)
            throw Error("a model message from peer " + std::to_string(sender_) + " carries " +
                        std::to_string(msg.payload.size()) + " values, expected " +
                        std::to_string(size_));
        if (msg.kind == MessageKind::full_model) {
            replica_ = msg.payload;
        } else {
            assert(replica_.size() == size_ && "a delta before any full model");
            for (std::size_t k = 0; k < size_; ++k) replica_[k] += msg.payload[k];
        }
    }
    next_seq_ = msg.edge_seq + 1;
    covered_ = std::max(covered_, msg.round);
}

}  // namespace gossamer::proto
