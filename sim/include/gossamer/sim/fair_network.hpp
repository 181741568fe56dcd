#pragma once
/// The fair-share virtual network (docs/formats/cluster-format.md, "Timing"): every message is a
/// flow, and the flows in flight share each peer's uplink, each peer's downlink, each capped
/// link and each rack's uplink and downlink (for messages between racks) max-min fairly
/// (progressive filling), as TCP flows do under the lab's htb. Rates are recomputed at every
/// instant at which flows start or end, over the flows around the change (widened only as far as
/// rates move), so a change costs the size of its neighbourhood, not n.

#include <array>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gossamer/core/cluster.hpp"

namespace gossamer::sim {

/// Fluid max-min fair sharing of uplinks, downlinks and link caps. A flow of S bytes started at
/// t over an idle path of bottleneck rate B ends at t + S / B; its last byte reaches the
/// receiver the link's latency later. Deterministic: the same calls give the same times.
class FairNetwork {
  public:
    /// A flow's end time changed: the flow ends at `end` unless a later update for it comes
    /// (then `version` is stale, see current()).
    struct Update {
        std::uint32_t flow = 0;
        std::uint32_t version = 0;
        Time end = 0.0;
    };

    /// Copies the per-peer uplinks and downlinks and the link caps of `cluster`. Throws
    /// gossamer::Error when it has no peers.
    explicit FairNetwork(const Cluster& cluster);

    int n() const { return n_; }

    /// Starts a flow of `bytes` from `from` to `to` (from != to, both in [0, n)) at `now` (never
    /// before an earlier call's `now`) and returns its id. Its rate, and the new rates of the
    /// flows it shares with, come with the next settle(). Throws gossamer::Error for bad ranks.
    std::uint32_t start(int from, int to, std::uint64_t bytes, Time now);
    /// Ends a flow at `now` (its current end) and frees its id; the flows it shared with get
    /// their new rates with the next settle(). Throws gossamer::Error when it is not in flight.
    void finish(std::uint32_t flow, Time now);
    /// Whether flows started or ended since the last settle().
    bool unsettled() const { return !dirty_.empty() || !zero_.empty(); }
    /// Shares the network anew after every start() and finish() since the last call, all at
    /// `now` (one recomputation for a burst of messages at one instant), and appends an update
    /// for every new flow and every flow whose end moved.
    void settle(Time now, std::vector<Update>& changed);
    /// Whether (flow, version) is the flow's latest update and the flow is still in flight.
    bool current(std::uint32_t flow, std::uint32_t version) const;

    /// The flow's current rate in bytes/s (0 for a zero-byte flow). For tests.
    double rate_of(std::uint32_t flow) const;
    /// Flows in flight.
    std::size_t in_flight() const { return in_flight_; }

  private:
    struct Flow {
        int from = 0, to = 0;
        int link = -1;                     // the link's resource when its cap may bind, else -1
        int rack_up = -1, rack_down = -1;  // the rack links it crosses, else -1
        double remaining = 0, rate = 0;
        Time last = 0, end = 0;
        // Scratch of one reshare: the rate it computes and the resource that fixed it.
        double next = 0;
        int bottleneck = -1;
        std::uint32_t version = 0;
        std::uint64_t in = 0, frozen = 0;       // == the reshare's / the pass's mark when set
        bool active = false, attached = false;  // zero-byte flows occupy nothing
    };
    struct Resource {
        double capacity = 0;
        std::vector<std::uint32_t> flows;  // in flight through it
        // Scratch of one pass: capacity left to the flows being reshared, how many of them
        // are not fixed yet, and whether the pass touches it.
        double left = 0;
        int unfrozen = 0;
        std::uint64_t mark = 0;
        std::uint64_t dirty = 0;  // == reshare_mark_ while in dirty_
    };

    void check_rank(int rank) const;
    // The resources a flow crosses (-1: none): uplink, downlink, link cap, rack up, rack down.
    std::array<int, 5> path(const Flow& f) const;
    int link_resource(int from, int to);
    void admit(std::uint32_t id);
    void touch(int resource);
    // Progressive filling of the admitted flows, the others held at their rates.
    void fill();
    // Admits the flows the last fill may have wronged; false when there are none.
    bool widen();

    int n_ = 0;
    Cluster cluster_;
    // Uplinks [0, n), downlinks [n, 2n), rack uplink and downlink pairs, then link caps.
    std::vector<Resource> resources_;
    std::unordered_map<std::uint64_t, int> links_;
    std::vector<Flow> flows_;
    std::vector<std::uint32_t> free_;
    std::size_t in_flight_ = 0;
    std::uint64_t reshare_mark_ = 1, pass_mark_ = 0;  // never wrap
    std::vector<int> dirty_;           // resources whose flows changed since settle()
    std::vector<std::uint32_t> zero_;  // zero-byte flows started since settle()
    // Scratch, kept for its capacity: the admitted flows and the resources they cross.
    std::vector<std::uint32_t> admitted_;
    std::vector<int> touched_;
    std::vector<std::pair<double, int>> heap_;  // (share, resource), a min-heap
};

}  // namespace gossamer::sim
