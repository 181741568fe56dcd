#pragma once
/// Quantized all-reduce: data-parallel SGD whose ring all-reduce sends compressed payloads
/// (fp16, int8 per block, top-k, random-k), with error feedback kept per peer. See
/// docs/algorithms/qallreduce.md.
///
/// The ring schedule is allreduce's (ring.hpp, one chunk per segment). Peer r keeps an error
/// vector e (zeros at the start) and contributes u = g + e. Reduce-scatter step k: it decodes
/// the partial sum it received, adds its own u on that segment, encodes the result s for the
/// next rank and keeps s - Q(s) as the segment's new error (step 0 sends Q(u) of its first
/// segment). The owner of a segment encodes the average s / n once and keeps s - n Q(s / n) as
/// its error; the all-gather forwards those bytes unchanged, so every peer decodes the same
/// floats and applies the same average: models stay bitwise identical, as under allreduce.
/// A sum of sparse vectors (top-k) is handled by decoding into a dense buffer before adding;
/// what a hop drops goes into that hop's error and is sent in a later step.
///
/// Messages: MessageKind::reduce, round = the all-reduce number, chunk = the schedule step,
/// offset = the segment's first element, codec = 1 + the compressor kind, elements = the
/// encoded 4-byte words (exact bytes on the wire: header + encoded_words(segment) * 4).
/// Random draws (int8 rounding, random-k indices) come from CodecKey{seed, stream, index} with
/// stream naming the phase and the sender (reduce) or the segment (gather), index the step of
/// the round. Copies are made (the payloads are encoded bytes), so this protocol never borrows
/// or places values: zero-copy drivers run it with ordinary owned messages.
///
/// A failure stops it as it stops allreduce (failed_rank(), done). Host memory only.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "gossamer/core/json.hpp"
#include "gossamer/optimizers/compress/compressor.hpp"
#include "gossamer/optimizers/protocol/protocol.hpp"

namespace gossamer::proto {

struct QallreduceOptions {
    optim::CompressorConfig compressor{.kind = optim::CompressorKind::int8};
    bool error_feedback = true;
};

/// Reads {"compressor": {...}, "error_feedback": true} (nullptr: int8 with blocks of 256 and
/// error feedback). Throws ConfigError naming the JSON path.
QallreduceOptions parse_qallreduce_options(const json::Node* options);

class Qallreduce final : public Protocol {
  public:
    /// Throws ConfigError for a worker on a device.
    Qallreduce(PeerContext ctx, QallreduceOptions options);

    std::string_view name() const override { return "qallreduce"; }
    std::span<const float> compute_point() override { return context().worker->params(); }
    void current_model(std::span<float> out) const override { copy_params_to(out); }

    std::optional<int> failed_rank() const noexcept { return failed_rank_; }
    /// The error carried to the next all-reduce (math mode).
    std::span<const float> error() const noexcept { return err_; }

  protected:
    void on_start(Time now, Actions& out) override;
    void on_step_finished(Time now, double loss, Actions& out) override;
    void on_message(Time now, Message msg, Actions& out) override;
    void on_peer_failed(Time now, int rank, Actions& out) override;

  private:
    optim::CodecKey key(int k, int sender, int segment) const;
    Message header(int k) const;
    void send_encoded(int k, std::span<const float> s, std::span<float> q, Actions& out);
    void progress(Actions& out);
    void next_step(Actions& out);

    QallreduceOptions options_;
    std::unique_ptr<optim::Compressor> q_;
    bool math_;
    std::size_t length_;
    int steps_;
    std::vector<float> err_;    // e, then u = g + e during an all-reduce
    std::vector<float> acc_;    // the decoded average
    std::vector<float> dense_;  // one decoded segment
    std::int64_t round_ = 0;
    int next_ = 0;  // the schedule step awaited next
    bool active_ = false;
    std::int64_t steps_finished_ = 0;
    std::uint64_t edge_seq_ = 0;
    std::map<std::pair<std::int64_t, int>, Message> pending_;  // (round, step)
    std::optional<int> failed_rank_;
};

std::unique_ptr<Protocol> make_qallreduce(const json::Node* options, PeerContext ctx);

}  // namespace gossamer::proto
