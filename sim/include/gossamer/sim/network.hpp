#pragma once
/// The virtual network (docs/formats/cluster-format.md, "Timing"): each peer's sends share its
/// uplink and its receives share its downlink, first come first served, so a busy peer's messages
/// queue; a message between racks also queues on the two rack links it crosses. Also the
/// analytic ring all-reduce cost of the simulator's cost-only mode.

#include <cstdint>
#include <vector>

#include "gossamer/core/cluster.hpp"

namespace gossamer::sim {

/// When one message occupies the network.
struct Transfer {
    Time start = 0.0;    ///< the sender's uplink begins transmitting
    Time sent = 0.0;     ///< the uplink is done: the sender's buffer may be reused
    Time arrival = 0.0;  ///< the last byte is at the receiver
};

/// Bytes and messages through one peer, counted when send() schedules them.
struct Traffic {
    std::uint64_t bytes_sent = 0, bytes_received = 0;
    std::uint64_t messages_sent = 0, messages_received = 0;
};

/// Busy-until state of every uplink and downlink. Messages queue in the order send() is called,
/// which the simulator makes the order of their `now`.
class Network {
  public:
    /// Copies the links and per-peer bandwidths of `cluster`. Throws gossamer::Error when empty.
    explicit Network(const Cluster& cluster);

    int n() const { return static_cast<int>(traffic_.size()); }

    /// Schedules `bytes` from `from` to `to` (from != to, both in [0, n)), handed over at `now`.
    /// With B = rate(from, to) and L = latency(from, to): transmission starts at
    /// s = max(now, uplink of `from` free), the uplink is busy for [s, s + bytes / B); the first
    /// byte reaches `to` at s + L, and its downlink carries the message for bytes / B from
    /// r = max(s + L, downlink of `to` free). Arrival is r + bytes / B, so an idle network gives
    /// now + L + bytes / B. Throws gossamer::Error for bad ranks.
    Transfer transfer(int from, int to, std::uint64_t bytes, Time now);
    /// transfer(...).arrival.
    Time send(int from, int to, std::uint64_t bytes, Time now) {
        return transfer(from, to, bytes, now).arrival;
    }

    /// The bottleneck bandwidth of from -> to in bytes/s: min(link, uplink of from, downlink
    /// of to, and between racks the sender's rack uplink and the receiver's rack downlink).
    double rate(int from, int to) const;
    /// The latency of from -> to in seconds.
    Time latency(int from, int to) const;

    /// When peer `rank`'s uplink / downlink finishes its queued messages.
    Time uplink_free(int rank) const;
    Time downlink_free(int rank) const;
    const Traffic& traffic(int rank) const;

    /// Forgets all queued messages and counters (the cluster stays).
    void reset();

  private:
    void check_rank(int rank) const;

    Cluster cluster_;
    std::vector<Time> up_free_, down_free_;
    std::vector<Time> rack_up_free_, rack_down_free_;  // per rack (network.racks)
    std::vector<Traffic> traffic_;
};

/// Ring all-reduce (reduce-scatter then all-gather, 2(n - 1) steps of one S/n chunk per peer):
/// 2 (n - 1) (L + (S / n) / B) seconds; 0 for n = 1. `bandwidth` in bytes/s, `latency` in s.
Time ring_allreduce_time(int n, std::uint64_t bytes, Time latency, double bandwidth);

/// The same on a cluster, ring in rank order 0 -> 1 -> ... -> n-1 -> 0: every step takes as long
/// as its slowest ring link, 2 (n - 1) max_i (L_i + (S / n) / B_i) with L_i, B_i = latency and
/// rate of i -> i + 1 (B_i as in Network::rate). Ignores compute, failures and queueing.
Time ring_allreduce_time(const Cluster& cluster, std::uint64_t bytes);

}  // namespace gossamer::sim
