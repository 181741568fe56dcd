#include <doctest/doctest.h>

#include "gossamer/core/error.hpp"
#include "gossamer/sim/network.hpp"

using namespace gossamer;
using namespace gossamer::sim;

namespace {

// Latency 1/8 s, 1024 bytes/s everywhere: every time below is a dyadic fraction, so exact.
constexpr Time L = 0.125;
constexpr double B = 1024.0;

}  // namespace

TEST_CASE("one message arrives at t + L + S/B") {
    Network net(homogeneous_cluster(4, 0.1, L, B));
    const Transfer t = net.transfer(0, 1, 512, 3.0);
    CHECK(t.start == 3.0);
    CHECK(t.sent == 3.0 + 512 / B);
    CHECK(t.arrival == 3.0 + L + 512 / B);
    CHECK(net.uplink_free(0) == t.sent);
    CHECK(net.downlink_free(1) == t.arrival);
    CHECK(net.uplink_free(1) == 0.0);  // nothing else is touched
    CHECK(net.downlink_free(0) == 0.0);
    // Idle again later: no queueing.
    CHECK(net.send(0, 1, 512, 10.0) == 10.0 + L + 512 / B);
}

TEST_CASE("a zero-byte message arrives after the latency") {
    Network net(homogeneous_cluster(2, 0.1, L, B));
    CHECK(net.send(1, 0, 0, 2.0) == 2.0 + L);
    CHECK(net.send(1, 0, 0, 2.0) == 2.0 + L);  // and occupies nothing
}

TEST_CASE("two messages from one uplink serialise: the second arrives S/B later") {
    Network net(homogeneous_cluster(3, 0.1, L, B));
    const Time a = net.send(0, 1, 2048, 1.0);
    const Transfer b = net.transfer(0, 2, 2048, 1.0);
    CHECK(a == 1.0 + L + 2.0);
    CHECK(b.start == 3.0);  // waits for the uplink
    CHECK(b.arrival == a + 2048 / B);
    // A message handed over after the uplink is free does not wait.
    CHECK(net.transfer(0, 1, 1024, 10.0).start == 10.0);
}

TEST_CASE("two messages into one downlink from different senders serialise there") {
    Network net(homogeneous_cluster(3, 0.1, L, B));
    const Time a = net.send(0, 2, 1024, 0.0);
    const Transfer b = net.transfer(1, 2, 1024, 0.0);
    CHECK(a == L + 1.0);
    CHECK(b.start == 0.0);  // its own uplink is free
    CHECK(b.sent == 1.0);
    CHECK(b.arrival == a + 1024 / B);
    // A third sender that starts after the downlink drained is not delayed.
    CHECK(net.send(0, 2, 1024, 5.0) == 5.0 + L + 1.0);
}

TEST_CASE("the bottleneck is the slowest of link, uplink and downlink") {
    Cluster c = homogeneous_cluster(3, 0.1, L, B);
    c.peers[0].uplink = 256.0;
    c.peers[2].downlink = 512.0;
    Network net(c);
    CHECK(net.rate(0, 1) == 256.0);
    CHECK(net.rate(1, 2) == 512.0);
    CHECK(net.rate(0, 2) == 256.0);
    CHECK(net.rate(2, 1) == B);
    CHECK(net.send(1, 2, 1024, 0.0) == L + 2.0);
}

TEST_CASE("link overrides from a cluster file apply to the right link") {
    const Cluster c = parse_cluster(gossamer::json::parse_text(R"({"network": {"latency": 0.125,
        "bandwidth": 1024, "links": [{"from": 0, "to": 1, "latency": 1.5},
                                     {"between": [1, 2], "bandwidth": 256}]},
        "defaults": {"base_time": 0.1}, "peers": [{"rank": 3, "downlink": 128}]})",
                                                               "c.json"),
                                    4);
    Network net(c);
    CHECK(net.send(0, 1, 1024, 0.0) == 1.5 + 1.0);
    CHECK(net.send(1, 0, 1024, 0.0) == L + 1.0);  // the reverse direction keeps the default
    CHECK(net.send(1, 2, 1024, 10.0) == 10.0 + L + 4.0);
    CHECK(net.send(2, 1, 1024, 20.0) == 20.0 + L + 4.0);
    CHECK(net.send(0, 2, 1024, 30.0) == 30.0 + L + 1.0);
    CHECK(net.send(0, 3, 128, 40.0) == 40.0 + L + 1.0);  // rank 3's downlink is the bottleneck
}

TEST_CASE("byte and message counters per peer") {
    Network net(homogeneous_cluster(3, 0.1, L, B));
    net.send(0, 1, 100, 0.0);
    net.send(0, 2, 50, 0.0);
    net.send(2, 1, 7, 0.0);
    CHECK(net.traffic(0).bytes_sent == 150);
    CHECK(net.traffic(0).messages_sent == 2);
    CHECK(net.traffic(0).bytes_received == 0);
    CHECK(net.traffic(1).bytes_received == 107);
    CHECK(net.traffic(1).messages_received == 2);
    CHECK(net.traffic(2).bytes_sent == 7);
    CHECK(net.traffic(2).bytes_received == 50);
    net.reset();
    CHECK(net.traffic(1).bytes_received == 0);
    CHECK(net.uplink_free(0) == 0.0);
    CHECK_THROWS_AS(net.send(0, 0, 1, 0.0), gossamer::Error);
    CHECK_THROWS_AS(net.send(0, 3, 1, 0.0), gossamer::Error);
}

TEST_CASE("ring all-reduce cost: 2(n-1)(L + (S/n)/B) on the slowest ring link") {
    CHECK(ring_allreduce_time(4, 4096, L, B) == 2.0 * 3 * (L + 1.0));
    CHECK(ring_allreduce_time(1, 4096, L, B) == 0.0);
    CHECK(ring_allreduce_time(2, 0, L, B) == 2.0 * L);
    Cluster c = homogeneous_cluster(4, 0.1, L, B);
    CHECK(ring_allreduce_time(c, 4096) == ring_allreduce_time(4, 4096, L, B));
    c.links[{2, 3}] = {0.5, 256.0};  // on the ring: this link sets the pace
    CHECK(ring_allreduce_time(c, 4096) == 2.0 * 3 * (0.5 + 4.0));
    c.links.clear();
    c.links[{3, 2}] = {0.5, 256.0};  // not on the ring 0 -> 1 -> 2 -> 3 -> 0
    CHECK(ring_allreduce_time(c, 4096) == ring_allreduce_time(4, 4096, L, B));
    c.peers[1].uplink = 512.0;
    CHECK(ring_allreduce_time(c, 4096) == 2.0 * 3 * (L + 2.0));
    CHECK_THROWS_AS(ring_allreduce_time(0, 1, L, B), gossamer::Error);
}
