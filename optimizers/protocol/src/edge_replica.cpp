#include "gossamer/optimizers/protocol/edge_replica.hpp"

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
                             std::uint64_t stream, Device* device)
    : receiver_(receiver), size_(size), math_(math), q_(q), stream_(stream), device_(device) {}

Message ReplicaSender::encode(std::span<const float> x, std::int64_t round) {
    Message m;
    m.receiver = receiver_;
    m.edge_seq = next_seq_++;
    m.round = round;
    m.elements = size_;
    last_round_ = round;
    // First contact sends the model itself rather than a delta against zeros: the same values,
    // but the receiver can take it through the one full-model path that re-syncs also use.
    const bool first = device_ ? dreplica_.empty() : replica_.empty();
    m.kind = first ? MessageKind::full_model : MessageKind::model_delta;
    if (!first && q_) m.elements = q_->encoded_words(size_);
    if (!math_) return m;
    assert(x.size() == size_);
    if (device_) return encode_on_device(std::move(m), x);
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

// The device version of encode(): the same messages, with x and x_hat in device memory.
Message ReplicaSender::encode_on_device(Message m, std::span<const float> x) {
    if (m.kind == MessageKind::full_model) {
        dreplica_ = DeviceVector(*device_, size_);
        device_->copy(dreplica_.data(), x.data(), size_);
        m.payload.resize(size_);
        device_->download(m.payload, x.data());
        return m;
    }
    if (dscratch_.empty()) dscratch_ = DeviceVector(*device_, size_);
    device_->delta(dscratch_.data(), x.data(), dreplica_.data(), size_);
    m.payload.resize(m.elements);
    if (q_) {
        const optim::CodecKey key{0, stream_, m.edge_seq};
        device_->encode(*q_, dscratch_.data(), size_, key, bytes_of(m.payload));
        device_->decode_add(*q_, std::as_bytes(std::span<const float>(m.payload)), key,
                            dreplica_.data(), size_);
        return m;
    }
    device_->download(m.payload, dscratch_.data());
    device_->axpy(dreplica_.data(), 1.0f, dscratch_.data(), size_);
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
    if (math_ && device_) {
        m.payload.resize(size_);
        device_->download(m.payload, dreplica_.data());
    } else if (math_) {
        m.payload = replica_;
    }
    return m;
}

ReplicaReceiver::ReplicaReceiver(int sender, std::size_t size, bool math,
                                 const optim::Compressor* q, std::uint64_t stream, Device* device)
    : sender_(sender), size_(size), math_(math), q_(q), stream_(stream), device_(device) {}

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
        const auto bytes = std::as_bytes(std::span<const float>(msg.payload));
        const optim::CodecKey key{0, stream_, msg.edge_seq};
        if (device_) {
            assert(dreplica_.size() == size_ && "a delta before any full model");
            device_->decode_add(*q_, bytes, key, dreplica_.data(), size_);
        } else {
            assert(replica_.size() == size_ && "a delta before any full model");
            q_->decode_add(bytes, key, replica_);
        }
    } else if (math_) {
        if (msg.payload.size() != size_)
            throw Error("a model message from peer " + std::to_string(sender_) + " carries " +
                        std::to_string(msg.payload.size()) + " values, expected " +
                        std::to_string(size_));
        if (device_ && msg.kind == MessageKind::full_model) {
            if (dreplica_.empty()) dreplica_ = DeviceVector(*device_, size_);
            device_->upload(dreplica_.data(), msg.payload);
        } else if (device_) {
            assert(dreplica_.size() == size_ && "a delta before any full model");
            device_->upload_add(dreplica_.data(), msg.payload);
        } else if (msg.kind == MessageKind::full_model) {
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
