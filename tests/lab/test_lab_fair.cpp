// The simulator's fair-share network model against the lab: k TCP flows through one htb-shaped
// link take what sim::FairNetwork predicts for them: the mean time per message and the last
// message's end within 10%, every single flow within 25% (TCP flows sharing one FIFO queue are
// fair on average, not flow by flow), and closer than the FIFO model (docs/modules/simulator.md,
// "The network model against the lab").
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "gossamer/lab/blast.hpp"
#include "gossamer/lab/from_cluster.hpp"
#include "gossamer/sim/fair_network.hpp"
#include "gossamer/sim/network.hpp"
#include "lab_support.hpp"

namespace lab = gossamer::lab;
using gossamer::Cluster;
using gossamer::Time;
using gossamer::sim::FairNetwork;
using gossamer::test::have_netns;

namespace {

// The model's end of every flow, all started at 0 with `bytes` each.
std::vector<Time> predict(const Cluster& c, const std::vector<lab::Flow>& flows,
                          std::uint64_t bytes) {
    FairNetwork net(c);
    std::vector<FairNetwork::Update> u;
    std::map<std::uint32_t, std::size_t> index;
    for (std::size_t k = 0; k < flows.size(); ++k)
        index[net.start(flows[k].from, flows[k].to, bytes, 0.0)] = k;
    std::map<std::uint32_t, FairNetwork::Update> latest;
    std::vector<Time> ends(flows.size(), -1);
    Time now = 0;
    for (std::size_t left = flows.size(); left > 0; --left) {
        net.settle(now, u);
        for (const auto& x : u) latest[x.flow] = x;
        u.clear();
        auto first = latest.begin();
        for (auto it = latest.begin(); it != latest.end(); ++it)
            if (it->second.end < first->second.end) first = it;
        const auto [flow, update] = *first;
        latest.erase(first);
        REQUIRE(net.current(flow, update.version));
        ends[index[flow]] = now = update.end;
        net.finish(flow, now);
    }
    return ends;
}

// The FIFO model's arrivals (the simulator before the fair model), handed over in flow order.
std::vector<Time> predict_fifo(const Cluster& c, const std::vector<lab::Flow>& flows,
                               std::uint64_t bytes) {
    gossamer::sim::Network net(c);
    std::vector<Time> ends;
    for (const auto& f : flows) ends.push_back(net.send(f.from, f.to, bytes, 0.0));
    return ends;
}

double mean(const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return s / static_cast<double>(v.size());
}

// One run of the flows against both models.
struct Trial {
    std::vector<double> ratio;  // per flow: measured / fair-share model
    double per_message = 0, last = 0, fair_error = 0, fifo_error = 0;
    bool differ = false;  // the two models predict different times
    bool ok() const {
        for (double r : ratio)
            if (r < 0.75 || r > 1.25) return false;
        return per_message >= 0.9 && per_message <= 1.1 && last >= 0.9 && last <= 1.1 &&
               (!differ || fair_error < fifo_error);
    }
};

// Runs the flows at once in a lab built from `c`, `bytes` each, and compares the flows' times
// with the models'.
Trial run_flows(const Cluster& c, const std::vector<lab::Flow>& flows, std::uint64_t bytes) {
    const auto expected = predict(c, flows, bytes);
    const auto fifo = predict_fifo(c, flows, bytes);
    auto l = lab::Lab::create(lab::spec_from_cluster(c));
    lab::BlastOptions o;
    o.seconds = 30;  // a bound: every flow here ends within a few seconds
    o.max_bytes = bytes;
    o.start_together = true;
    const auto results = lab::blast(l, flows, o);
    REQUIRE(results.size() == flows.size());
    Trial t;
    t.differ = expected != fifo;
    std::vector<double> measured;
    for (std::size_t k = 0; k < flows.size(); ++k) {
        const auto& r = results[k];
        CAPTURE(k);
        REQUIRE_MESSAGE(r.error.empty(), r.error);
        REQUIRE(r.received == bytes);
        t.ratio.push_back(r.seconds / expected[k]);
        MESSAGE("flow " << r.flow.from << " -> " << r.flow.to << " of " << flows.size()
                        << ": measured " << r.seconds << " s, fair-share model " << expected[k]
                        << " s (ratio " << t.ratio.back() << "), fifo model " << fifo[k] << " s");
        measured.push_back(r.seconds);
        t.fair_error += std::abs(r.seconds - expected[k]);
        t.fifo_error += std::abs(r.seconds - fifo[k]);
    }
    t.per_message = mean(measured) / mean(expected);
    t.last = *std::max_element(measured.begin(), measured.end()) /
             *std::max_element(expected.begin(), expected.end());
    MESSAGE(flows.size() << " flows: mean time per message " << mean(measured) << " s, model "
                         << mean(expected) << " s (ratio " << t.per_message << "), fifo model "
                         << mean(fifo) << " s; last end ratio " << t.last);
    return t;
}

// The mean time per message and the last end within 10% of the fair-share model, every flow
// within 25%, and the fair-share model closer than the FIFO one. TCP on a shared machine is
// noisy (other tests' labs and builds share its 2 cores): a run outside the bounds is tried
// once more, and the second run is judged.
void check_against_model(const Cluster& c, const std::vector<lab::Flow>& flows,
                         std::uint64_t bytes) {
    Trial t = run_flows(c, flows, bytes);
    if (!t.ok()) {
        MESSAGE("outside the bounds once; measuring again");
        t = run_flows(c, flows, bytes);
    }
    for (double r : t.ratio) {
        CHECK(r >= 0.75);
        CHECK(r <= 1.25);
    }
    CHECK(t.per_message >= 0.9);
    CHECK(t.per_message <= 1.1);
    CHECK(t.last >= 0.9);
    CHECK(t.last <= 1.1);
    if (t.differ) CHECK(t.fair_error < t.fifo_error);
}

// Five peers, 1 Gbit/s each way, peer 0's uplink shaped to 100 Mbit/s.
Cluster five_peers() {
    Cluster c = gossamer::homogeneous_cluster(5, 0.1, 0.0, 1.25e8);
    c.peers[0].uplink = 1.25e7;
    return c;
}

constexpr std::uint64_t kBytes = 6'250'000;  // 0.5 s alone at 100 Mbit/s

}  // namespace

TEST_SUITE("lab") {
    TEST_CASE("fair share: one, two and four flows through a 100 Mbit/s uplink, within 10%") {
        if (!have_netns()) return;
        for (int k : {1, 2, 4}) {
            CAPTURE(k);
            std::vector<lab::Flow> flows;
            for (int j = 1; j <= k; ++j) flows.push_back({0, j});
            check_against_model(five_peers(), flows, kBytes);
        }
    }

    TEST_CASE("fair share: two and four flows into a 100 Mbit/s downlink, within 10%") {
        if (!have_netns()) return;
        Cluster c = gossamer::homogeneous_cluster(5, 0.1, 0.0, 1.25e8);
        c.peers[0].downlink = 1.25e7;
        for (int k : {2, 4}) {
            CAPTURE(k);
            std::vector<lab::Flow> flows;
            for (int j = 1; j <= k; ++j) flows.push_back({j, 0});
            check_against_model(c, flows, kBytes);
        }
    }

    TEST_CASE("fair share: a flow held to 25 Mbit/s elsewhere leaves 75 to the other, within 10%") {
        if (!have_netns()) return;
        // FIFO would say 0.5 s and 2.5 s (the slow flow holding the uplink after the fast one);
        // max-min fair says 0.67 s (75 Mbit/s) and 2.0 s (25 Mbit/s all along).
        Cluster c = five_peers();
        c.peers[2].downlink = 3.125e6;
        check_against_model(c, {{0, 1}, {0, 2}}, kBytes);
    }
}
