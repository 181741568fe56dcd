#pragma once
/// Both ends of one directed edge that carries model deltas against a replica (DESIGN.md, "What
/// travels"), for averaging protocols such as dpsgd (and, later, choco).
///
/// The sender keeps x_hat, the copy of its model that the receiver holds. Every message on the
/// edge has the next edge sequence number: the first is a full model (the receiver's replica
/// starts empty), later ones the delta x - x_hat, after which the sender adds that very delta to
/// x_hat. The receiver adds each delta to its replica in sequence order, so both copies stay
/// bit-identical. A message whose number is past the expected one opens a gap: it is buffered
/// until the gap is filled (reordering) or a full model re-synchronises the replica (loss).
///
/// A full model with number S supersedes every message numbered S or less: the receiver takes it
/// as its replica and expects S + 1 next. The sender answers a re-sync request with its x_hat
/// numbered with the last number it sent, so a re-sync costs no sequence number.
///
/// In cost-only mode (math false) no replica is kept and messages carry no payload, but the
/// numbering works the same.
///
/// With a compressor Q (multirate partitions may name one), a delta message carries the encoded
/// Q(x - x_hat) (Compressor::encoded_words words) and both ends add the same decoded floats, so
/// the replicas stay bit-identical and what Q dropped travels in later messages (error
/// feedback). Full models are never compressed. The CodecKey is (0, stream, edge_seq); both ends
/// must be given the same stream.
///
/// With a Device (gossamer/optimizers/device.hpp), x and the replicas are device memory: the
/// delta, the replica updates and the codec run on the device, and only the payload crosses to
/// host memory. The messages are the same bytes as the host path's.

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "gossamer/core/state_io.hpp"
#include "gossamer/optimizers/compress/compressor.hpp"
#include "gossamer/optimizers/protocol/device.hpp"
#include "gossamer/transport/message.hpp"

namespace gossamer::proto {

/// The control message a receiver sends when a round's message on an edge is overdue: it asks
/// `receiver` (the edge's sender) for a full replica, naming the sequence number it expects.
transport::Message resync_request(int receiver, std::uint32_t partition, std::uint64_t expected_seq,
                                  std::int64_t round);

/// The sender's end of edge (sender, receiver).
class ReplicaSender {
  public:
    /// @param receiver  the peer at the other end
    /// @param size      model length in floats
    /// @param math      false: cost-only, no values
    /// @param q         compressor for deltas (nullptr: exact floats); must outlive the sender
    /// @param stream    CodecKey stream of the edge (the receiver uses the same)
    /// @param device    where x and x_hat live (nullptr: host memory); must outlive the sender
    ReplicaSender(int receiver, std::size_t size, bool math, const optim::Compressor* q = nullptr,
                  std::uint64_t stream = 0, Device* device = nullptr);

    /// The message that brings the receiver's replica to `x` for round `round`: a full model on
    /// first contact, else the delta x - x_hat (x_hat then moves by that delta). Takes the next
    /// sequence number.
    transport::Message encode(std::span<const float> x, std::int64_t round);
    /// Whether message `seq` has been sent, i.e. whether a re-sync can cover it.
    bool sent(std::uint64_t seq) const noexcept { return seq < next_seq_; }
    /// A full model of x_hat numbered with the last sequence number sent (nothing sent: invalid).
    transport::Message resync() const;

    int receiver() const noexcept { return receiver_; }
    std::uint64_t next_seq() const noexcept { return next_seq_; }
    std::int64_t last_round() const noexcept { return last_round_; }
    /// x_hat: what the receiver holds once every message sent has arrived (device memory with
    /// a device).
    std::span<const float> replica() const noexcept {
        return device_ ? std::span<const float>(dreplica_.span())
                       : std::span<const float>(replica_);
    }

    /// Checkpoints (edge_replica_state.cpp; host memory only): x_hat, the sequence number and
    /// round, saved as they are (x_hat + (x - x_hat) is not x in floating point).
    void save(StateWriter& w) const;
    void restore(StateReader& r);

  private:
    transport::Message encode_on_device(transport::Message m, std::span<const float> x);

    int receiver_;
    std::size_t size_;
    bool math_;
    const optim::Compressor* q_;
    std::uint64_t stream_;
    Device* device_;
    std::vector<float> replica_, scratch_;
    DeviceVector dreplica_, dscratch_;
    std::uint64_t next_seq_ = 0;
    std::int64_t last_round_ = -1;
};

/// The receiver's end of edge (sender, receiver).
class ReplicaReceiver {
  public:
    /// `q`, `stream` and `device` as the sender's (nullptr q: deltas are exact floats; nullptr
    /// device: host memory).
    ReplicaReceiver(int sender, std::size_t size, bool math, const optim::Compressor* q = nullptr,
                    std::uint64_t stream = 0, Device* device = nullptr);

    /// Takes a model_delta or full_model from the sender. A full model numbered at or past the
    /// expected number is applied at once; a delta is queued until advance(); anything already
    /// covered is dropped (counted in stale()).
    void accept(transport::Message msg);
    /// Applies, in sequence order, every queued message of round `round` or earlier; stops at the
    /// first missing number or at a message of a later round.
    void advance(std::int64_t round);
    /// True when the replica holds the sender's state of round `round` or later.
    bool covers(std::int64_t round) const noexcept { return covered_ >= round; }
    /// True when a later message waits behind a missing one.
    bool gap_open() const noexcept;

    int sender() const noexcept { return sender_; }
    /// The sequence number expected next.
    std::uint64_t next_seq() const noexcept { return next_seq_; }
    /// The sender's round the replica is at (-1: nothing received).
    std::int64_t round() const noexcept { return covered_; }
    /// The replica (device memory with a device).
    std::span<const float> replica() const noexcept {
        return device_ ? std::span<const float>(dreplica_.span())
                       : std::span<const float>(replica_);
    }
    /// Times a gap was seen open (a message arrived past a missing one).
    std::uint64_t gaps() const noexcept { return gaps_; }
    /// Messages dropped because a re-sync already covered them.
    std::uint64_t stale() const noexcept { return stale_; }
    /// Full models applied other than the first contact (re-synchronisations).
    std::uint64_t resyncs() const noexcept { return resyncs_; }

    /// Checkpoints (host memory only): the replica, the expected number and covered round,
    /// the counters; queued messages are not saved (their senders send them again).
    void save(StateWriter& w) const;
    void restore(StateReader& r);

  private:
    void apply(const transport::Message& msg);

    int sender_;
    std::size_t size_;
    bool math_;
    const optim::Compressor* q_;
    std::uint64_t stream_;
    Device* device_;
    std::vector<float> replica_;
    DeviceVector dreplica_;
    std::uint64_t next_seq_ = 0;
    std::int64_t covered_ = -1;
    std::map<std::uint64_t, transport::Message> queued_;  // by edge_seq
    std::uint64_t gaps_ = 0, stale_ = 0, resyncs_ = 0;
};

}  // namespace gossamer::proto
