#pragma once
/// The rack-aware (hierarchical) all-reduce: allreduce with `"hierarchy": {"rack_size": k}`
/// (docs/algorithms/allreduce.md, "Hierarchy"). Racks are k consecutive ranks (k divides n),
/// R = n / k racks; rank r is position i = r % k of rack g = r / k. One all-reduce runs three
/// phases of ring steps (ring.hpp), one message per step:
///   A. reduce-scatter inside the rack (ring of the k ranks of rack g, k - 1 steps): position i
///      then holds its rack's sum of rack segment W = ring::owned_segment(i, k) (1/k of x);
///   B. a ring all-reduce of W among the R ranks with the same position i, one per rack
///      (2 (R - 1) steps on W cut into R parts): the only phase whose messages leave the rack,
///      k disjoint rings in parallel, each carrying 2 (R - 1) / R x |W| per rank; the owner of a
///      part divides its full sum by n once (the one rounding every copy shares);
///   C. all-gather inside the rack (k - 1 steps).
/// Each peer sends 2 (k - 1) / k S + 2 (R - 1) / (R k) S bytes per all-reduce of S bytes (the
/// ring's 2 (n - 1) / n S when k = 1 or k = n). Through each rack's uplink go the phase-B
/// sends of its k ranks, 2 (R - 1) / R S in all: about what the ring in rank order sends across
/// each rack boundary, 2 (n - 1) / n S. What changes is the number of sequential steps, each a
/// latency and a wait for the slowest hop: 2 (k - 1) + 2 (R - 1) instead of 2 (n - 1) (268
/// instead of 2,046 for n = 1,024, k = 8), and phase B's k flows share the rack uplink.
///
/// The average equals the ring's to float rounding (another order of the sum); every peer
/// holds the same bits. Messages: MessageKind::reduce, round = the all-reduce, chunk = the
/// step t of the whole schedule, offset and elements the range sent, edge_seq counted per
/// receiver. Host memory only, one chunk per segment, no elastic modes; a failure stops the job
/// as it stops allreduce. Period H > 1 averages models (local SGD) as allreduce does.

#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "gossamer/optimizers/protocol/protocol.hpp"
#include "gossamer/optimizers/protocol/ring.hpp"
#include "gossamer/optimizers/protocols/allreduce/allreduce.hpp"

namespace gossamer::proto {

/// One step of the hierarchical schedule for one peer (a pure function, for the protocol and
/// its tests).
struct HierStep {
    int send_to = 0, recv_from = 0;
    ring::Range send, recv;  ///< element ranges of x
    bool reduce = false;     ///< add the received values (else copy them)
};

/// Steps of one hierarchical all-reduce: 2 (k - 1) + 2 (n / k - 1).
int hier_steps(int n, int k) noexcept;
/// Peer `rank`'s step t (0 <= t < hier_steps(n, k)) over a vector of `length` elements.
HierStep hier_step(std::size_t length, int n, int k, int rank, int t) noexcept;
/// The range whose full sum `rank` divides by n, and the step after which it does (-1: before
/// any step, n = 1).
std::pair<ring::Range, int> hier_owned(std::size_t length, int n, int k, int rank) noexcept;

class HierarchicalAllreduce final : public Protocol {
  public:
    /// Throws ConfigError ("hierarchy.rack_size", "chunks", "elastic", "algorithm") for a k that
    /// does not divide n, chunks > 1, an elastic mode or a worker on a device.
    HierarchicalAllreduce(PeerContext ctx, AllreduceOptions options);

    std::string_view name() const override { return "allreduce"; }
    std::span<const float> compute_point() override { return context().worker->params(); }
    void current_model(std::span<float> out) const override { copy_params_to(out); }
    bool failure_stops_job() const override { return true; }
    std::optional<int> stopped_by() const override { return failed_rank_; }

  protected:
    void on_start(Time now, Actions& out) override;
    void on_step_finished(Time now, double loss, Actions& out) override;
    void on_message(Time now, Message msg, Actions& out) override;
    void on_peer_failed(Time now, int rank, Actions& out) override;

  private:
    void begin(std::span<const float> local, Actions& out);
    void send_step(int t, Actions& out);
    void progress(Actions& out);
    void next_step(Actions& out);

    AllreduceOptions options_;
    bool math_;
    std::size_t length_;
    int k_, steps_;
    std::pair<ring::Range, int> owned_;
    std::vector<float> acc_;
    std::int64_t round_ = 0;
    int next_ = 0;  // the step awaited next
    bool active_ = false;
    std::int64_t steps_finished_ = 0;
    std::map<int, std::uint64_t> edge_seq_;                    // per receiver
    std::map<std::pair<std::int64_t, int>, Message> pending_;  // (round, step)
    std::optional<int> failed_rank_;
};

}  // namespace gossamer::proto
