#include "gossamer/sim/network.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "gossamer/core/error.hpp"

namespace gossamer::sim {

Network::Network(const Cluster& cluster) : cluster_(cluster) {
    if (cluster_.peers.empty()) throw Error("Network: the cluster has no peers");
    reset();
}

void Network::reset() {
    const auto n = cluster_.peers.size();
    up_free_.assign(n, 0.0);
    down_free_.assign(n, 0.0);
    rack_up_free_.assign(cluster_.racks.size(), 0.0);
    rack_down_free_.assign(cluster_.racks.size(), 0.0);
    traffic_.assign(n, Traffic{});
}

void Network::check_rank(int rank) const {
    if (rank < 0 || rank >= n())
        throw Error(fmt::format("Network: rank {} is out of range for {} peers", rank, n()));
}

double Network::rate(int from, int to) const {
    check_rank(from);
    check_rank(to);
    double b = std::min({cluster_.link(from, to).bandwidth, cluster_.peers[from].uplink,
                         cluster_.peers[to].downlink});
    if (cluster_.crosses_racks(from, to)) {
        if (const int a = cluster_.rack(from); a >= 0) b = std::min(b, cluster_.racks[a].uplink);
        if (const int c = cluster_.rack(to); c >= 0) b = std::min(b, cluster_.racks[c].downlink);
    }
    return b;
}

Time Network::latency(int from, int to) const {
    check_rank(from);
    check_rank(to);
    return cluster_.link(from, to).latency;
}

Transfer Network::transfer(int from, int to, std::uint64_t bytes, Time now) {
    if (from == to) throw Error(fmt::format("Network: peer {} sends to itself", from));
    // The message streams at the bottleneck rate end to end (cut-through): it holds the
    // sender's uplink for bytes / B, and the receiver's downlink for bytes / B once its first
    // byte is there and earlier messages into that downlink are through. Bytes that reach a busy
    // downlink wait in the network, so the uplink is not held back by the receiver's queue.
    const double b = rate(from, to);
    const Time wire = static_cast<double>(bytes) / b;
    // Between racks the message also holds the sender's rack uplink with its own uplink, and
    // the receiver's rack downlink with its downlink, one message at a time as theirs.
    const bool across = cluster_.crosses_racks(from, to);
    const int ra = across ? cluster_.rack(from) : -1, rb = across ? cluster_.rack(to) : -1;
    Transfer t;
    t.start = std::max(now, up_free_[from]);
    if (ra >= 0) t.start = std::max(t.start, rack_up_free_[ra]);
    t.sent = t.start + wire;
    up_free_[from] = t.sent;
    if (ra >= 0) rack_up_free_[ra] = t.sent;
    const Time first_byte = t.start + latency(from, to);
    t.arrival = std::max(first_byte, down_free_[to]);
    if (rb >= 0) t.arrival = std::max(t.arrival, rack_down_free_[rb]);
    t.arrival += wire;
    down_free_[to] = t.arrival;
    if (rb >= 0) rack_down_free_[rb] = t.arrival;

    traffic_[from].bytes_sent += bytes;
    traffic_[from].messages_sent += 1;
    traffic_[to].bytes_received += bytes;
    traffic_[to].messages_received += 1;
    return t;
}

Time Network::uplink_free(int rank) const {
    check_rank(rank);
    return up_free_[rank];
}

Time Network::downlink_free(int rank) const {
    check_rank(rank);
    return down_free_[rank];
}

const Traffic& Network::traffic(int rank) const {
    check_rank(rank);
    return traffic_[rank];
}

Time ring_allreduce_time(int n, std::uint64_t bytes, Time latency, double bandwidth) {
    if (n < 1 || !(latency >= 0.0) || !(bandwidth > 0.0))
        throw Error(
            fmt::format("ring_allreduce_time: bad arguments n = {}, latency = {}, "
                        "bandwidth = {}",
                        n, latency, bandwidth));
    const double chunk = static_cast<double>(bytes) / n;
    return 2.0 * (n - 1) * (latency + chunk / bandwidth);
}

Time ring_allreduce_time(const Cluster& cluster, std::uint64_t bytes) {
    const int n = cluster.n();
    if (n < 1) throw Error("ring_allreduce_time: the cluster has no peers");
    if (n == 1) return 0.0;
    const Network net(cluster);
    const double chunk = static_cast<double>(bytes) / n;
    Time slowest = 0.0;
    for (int i = 0; i < n; ++i) {
        const int next = (i + 1) % n;
        slowest = std::max(slowest, net.latency(i, next) + chunk / net.rate(i, next));
    }
    return 2.0 * (n - 1) * slowest;
}

}  // namespace gossamer::sim
