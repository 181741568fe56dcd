// The fair-share network model: max-min fair sharing of uplinks, downlinks and link caps among
// the flows in flight (docs/formats/cluster-format.md, "Timing"), alone and inside the simulator.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocol/protocol.hpp"
#include "gossamer/sim/fair_network.hpp"
#include "gossamer/sim/simulation.hpp"
#include "gossamer/topology/schedule.hpp"

using namespace gossamer;
using namespace gossamer::sim;

namespace {

// 1024 bytes/s everywhere: every time below is a dyadic fraction, so exact.
constexpr double B = 1024.0;
using Updates = std::vector<FairNetwork::Update>;

// Plays the network alone: flows end at their latest update, earliest first (ties by id), and
// the network settles at every instant something started or ended.
struct Player {
    FairNetwork net;
    Time now = 0;
    std::map<std::uint32_t, Time> ends;  // flow -> latest end
    std::map<std::uint32_t, std::uint32_t> versions;
    std::map<std::uint32_t, Time> done;

    explicit Player(const Cluster& c) : net(c) {}
    void settle() {
        Updates u;
        net.settle(now, u);
        for (const auto& x : u) {
            ends[x.flow] = x.end;
            versions[x.flow] = x.version;
        }
    }
    std::uint32_t start(int from, int to, std::uint64_t bytes, Time at) {
        run_until(at);
        now = at;
        return net.start(from, to, bytes, at);
    }
    // Settles, then ends every flow whose end is at or before t.
    void run_until(Time t) {
        while (true) {
            if (net.unsettled()) settle();
            if (ends.empty()) return;
            auto first = ends.begin();
            for (auto it = ends.begin(); it != ends.end(); ++it)
                if (it->second < first->second) first = it;
            if (first->second > t) return;
            const auto [flow, end] = *first;
            REQUIRE(net.current(flow, versions[flow]));
            ends.erase(first);
            done[flow] = end;
            now = end;
            net.finish(flow, end);
        }
    }
    double rate(std::uint32_t flow) {
        if (net.unsettled()) settle();
        return net.rate_of(flow);
    }
};

}  // namespace

TEST_CASE("fair network: one flow takes S/B, two and four equal flows n times as long") {
    for (int k : {1, 2, 4}) {
        CAPTURE(k);
        Player p(homogeneous_cluster(5, 0.1, 0.125, B));
        std::vector<std::uint32_t> ids;
        for (int j = 1; j <= k; ++j) ids.push_back(p.start(0, j, 2048, 1.0));  // one uplink
        CHECK(p.net.in_flight() == static_cast<std::size_t>(k));
        for (auto id : ids) CHECK(p.rate(id) == B / k);
        p.run_until(100);
        for (auto id : ids) CHECK(p.done[id] == 1.0 + k * 2.0);
        CHECK(p.net.in_flight() == 0);
    }
    // The same through one downlink, from different senders.
    Player p(homogeneous_cluster(5, 0.1, 0.125, B));
    std::vector<std::uint32_t> ids;
    for (int j = 0; j < 4; ++j) ids.push_back(p.start(j, 4, 1024, 0.0));
    p.run_until(100);
    for (auto id : ids) CHECK(p.done[id] == 4.0);
}

TEST_CASE("fair network: a flow that starts late gets the fair share from then on") {
    Player p(homogeneous_cluster(3, 0.1, 0.0, B));
    const auto a = p.start(0, 1, 2048, 0.0);  // alone it would end at 2
    const auto b = p.start(0, 2, 2048, 1.0);  // a has 1024 bytes left; both at B/2 from now
    CHECK(p.rate(a) == B / 2);
    CHECK(p.rate(b) == B / 2);
    p.run_until(100);
    CHECK(p.done[a] == 3.0);  // 1024 bytes at 512 bytes/s
    CHECK(p.done[b] == 4.0);  // 1024 bytes at 512, then the last 1024 alone at 1024
}

TEST_CASE("fair network: a flow limited elsewhere leaves the rest of its share to the others") {
    Cluster c = homogeneous_cluster(4, 0.1, 0.0, B);
    c.peers[2].downlink = 256;  // 0 -> 2 cannot use its half of 0's uplink
    Player p(c);
    const auto slow = p.start(0, 2, 1024, 0.0);
    const auto fast = p.start(0, 1, 3072, 0.0);
    CHECK(p.rate(slow) == 256);
    CHECK(p.rate(fast) == 768);
    p.run_until(100);
    CHECK(p.done[slow] == 4.0);
    CHECK(p.done[fast] == 4.0);
    // A link cap below the uplink binds the same way; one at or above it changes nothing.
    Cluster l = homogeneous_cluster(3, 0.1, 0.0, B);
    l.links[{0, 1}] = LinkSpec{0.0, 256};
    l.links[{0, 2}] = LinkSpec{0.0, 4096};
    Player q(l);
    const auto capped1 = q.start(0, 1, 1024, 0.0);
    const auto capped2 = q.start(0, 1, 1024, 0.0);
    const auto free = q.start(0, 2, 1024, 0.0);
    CHECK(q.rate(capped1) == 128);
    CHECK(q.rate(capped2) == 128);
    CHECK(q.rate(free) == 768);
}

TEST_CASE("fair network: a chain of shared links is max-min fair, not just per link") {
    // 0 -> 2 and 1 -> 2 share 2's downlink; 1 -> 3 shares 1's uplink with 1 -> 2. 0's uplink
    // (256) binds 0 -> 2 first; then 1's uplink, 512 each, binds before the 768 left of 2's
    // downlink. When 1's flows end, 0 -> 2 stays at 256: its own uplink is its bottleneck.
    Cluster c = homogeneous_cluster(4, 0.1, 0.0, B);
    c.peers[0].uplink = 256;
    Player p(c);
    const auto a = p.start(0, 2, 1024, 0.0);
    const auto b = p.start(1, 2, 1024, 0.0);
    const auto d = p.start(1, 3, 1024, 0.0);
    CHECK(p.rate(a) == 256);
    CHECK(p.rate(b) == 512);  // 1's uplink: b and d at 512 each bind first
    CHECK(p.rate(d) == 512);
    p.run_until(100);
    CHECK(p.done[b] == 2.0);
    CHECK(p.done[d] == 2.0);
    CHECK(p.done[a] == 4.0);
}

TEST_CASE("fair network: stale updates, one settle per instant, zero-byte flows, bad ranks") {
    FairNetwork net(homogeneous_cluster(3, 0.1, 0.0, B));
    Updates u;
    CHECK_FALSE(net.unsettled());
    const auto a = net.start(0, 1, 1024, 0.0);
    CHECK(net.unsettled());
    net.settle(0.0, u);
    CHECK_FALSE(net.unsettled());
    REQUIRE(u.size() == 1);
    const auto first = u[0];
    CHECK(first.end == 1.0);
    u.clear();
    net.start(0, 2, 1024, 0.0);
    net.settle(0.0, u);
    CHECK(u.size() == 2);  // the new flow, and a, which now ends later
    CHECK_FALSE(net.current(a, first.version));
    u.clear();
    // Two flows at one instant: one settle gives both their shares at once.
    net.start(1, 2, 1024, 0.5);
    net.start(1, 0, 1024, 0.5);
    const auto z = net.start(1, 2, 0, 0.5);
    net.settle(0.5, u);
    bool zero = false;
    for (const auto& x : u)
        if (x.flow == z) zero = x.end == 0.5;
    CHECK(zero);
    CHECK(net.in_flight() == 5);
    net.finish(z, 0.5);
    CHECK_THROWS_AS(net.finish(z, 0.5), Error);
    CHECK_THROWS_AS(net.start(0, 0, 8, 1.0), Error);
    CHECK_THROWS_AS(net.start(0, 3, 8, 1.0), Error);
    CHECK_THROWS_AS(net.start(-1, 1, 8, 1.0), Error);
}

namespace {

// Max-min fair rates from scratch (progressive filling over every flow), the reference for the
// incremental recomputation. flows: (from, to); links: caps by (from, to).
std::vector<double> reference_rates(const Cluster& c,
                                    const std::vector<std::pair<int, int>>& flows) {
    const int n = c.n();
    std::vector<double> left;
    for (const auto& p : c.peers) left.push_back(p.uplink);
    for (const auto& p : c.peers) left.push_back(p.downlink);
    std::map<std::pair<int, int>, int> link;
    std::vector<std::vector<int>> uses(flows.size());
    for (std::size_t k = 0; k < flows.size(); ++k) {
        const auto [a, b] = flows[k];
        uses[k] = {a, n + b};
        const double cap = c.link(a, b).bandwidth;
        if (cap < std::min(c.peers[a].uplink, c.peers[b].downlink)) {
            auto [it, fresh] = link.try_emplace({a, b}, static_cast<int>(left.size()));
            if (fresh) left.push_back(cap);
            uses[k].push_back(it->second);
        }
    }
    std::vector<double> rate(flows.size(), -1);
    for (std::size_t fixed = 0; fixed < flows.size();) {
        std::vector<int> count(left.size(), 0);
        for (std::size_t k = 0; k < flows.size(); ++k)
            if (rate[k] < 0)
                for (int r : uses[k]) ++count[r];
        int best = -1;
        for (std::size_t r = 0; r < left.size(); ++r)
            if (count[r] > 0 && (best < 0 || left[r] / count[r] < left[best] / count[best]))
                best = static_cast<int>(r);
        const double share = left[best] / count[best];
        for (std::size_t k = 0; k < flows.size(); ++k) {
            if (rate[k] >= 0 || std::find(uses[k].begin(), uses[k].end(), best) == uses[k].end())
                continue;
            rate[k] = share;
            ++fixed;
            for (int r : uses[k]) left[r] -= share;
        }
    }
    return rate;
}

}  // namespace

TEST_CASE("fair network: random starts and ends give the max-min rates computed from scratch") {
    std::mt19937 rng(7);
    for (int trial = 0; trial < 20; ++trial) {
        CAPTURE(trial);
        const int n = 6;
        Cluster c = homogeneous_cluster(n, 0.1, 0.0, 1000.0);
        const double caps[] = {100, 250, 400, 1000};
        for (auto& p : c.peers) {
            p.uplink = caps[rng() % 4];
            p.downlink = caps[rng() % 4];
        }
        for (int k = 0; k < 3; ++k) {
            const int a = static_cast<int>(rng() % n),
                      b = static_cast<int>((a + 1 + rng() % (n - 1)) % n);
            c.links[{a, b}] = LinkSpec{0.0, 20.0 + static_cast<double>(rng() % 200)};
        }
        FairNetwork net(c);
        std::map<std::uint32_t, std::pair<int, int>> active;
        Updates u;
        Time now = 0;
        for (int op = 0; op < 60; ++op) {
            // A burst of one to three changes at one instant, then one settle.
            for (int k = 1 + static_cast<int>(rng() % 3); k > 0; --k) {
                if (!active.empty() && rng() % 3 == 0) {
                    auto it = std::next(active.begin(), static_cast<long>(rng() % active.size()));
                    net.finish(it->first, now);
                    active.erase(it);
                } else {
                    const int a = static_cast<int>(rng() % n);
                    const int b = static_cast<int>((a + 1 + rng() % (n - 1)) % n);
                    active[net.start(a, b, 1 + rng() % 100000, now)] = {a, b};
                }
            }
            net.settle(now, u);
            u.clear();
            std::vector<std::pair<int, int>> flows;
            for (const auto& [id, f] : active) flows.push_back(f);
            const auto want = reference_rates(c, flows);
            std::size_t k = 0;
            for (const auto& [id, f] : active) {
                CAPTURE(op);
                CHECK(net.rate_of(id) == doctest::Approx(want[k++]).epsilon(1e-6));
            }
            now += 0.125;
        }
    }
}

namespace {

// Rank 0 sends one message of S = 1024 bytes to each other rank at time 0; everyone is done
// at once, and the receivers note when each message arrived.
class Burst final : public proto::Protocol {
  public:
    Burst(proto::PeerContext c, std::shared_ptr<std::vector<Time>> arrivals)
        : Protocol(std::move(c)), arrivals_(std::move(arrivals)) {}
    std::string_view name() const override { return "burst"; }
    std::span<const float> compute_point() override { return {}; }
    void current_model(std::span<float>) const override {}

  protected:
    void on_start(proto::Time, proto::Actions& out) override {
        if (rank() == 0)
            for (int j = 1; j < n(); ++j) {
                proto::Message m;
                m.kind = proto::MessageKind::model_delta;
                m.receiver = j;
                m.elements = (1024 - transport::kHeaderBytes) / 4;
                send(out, std::move(m));
            }
        out.done = true;
    }
    void on_step_finished(proto::Time, double, proto::Actions&) override {}
    void on_message(proto::Time now, proto::Message m, proto::Actions&) override {
        (*arrivals_)[static_cast<std::size_t>(m.receiver)] = now;
    }

  private:
    std::shared_ptr<std::vector<Time>> arrivals_;
};

std::vector<Time> burst(NetworkModel model) {
    const int n = 5;
    Cluster cluster = homogeneous_cluster(n, 0.1, 0.125, B);
    cluster.network_model = model;
    topology::FamilySpec fam;
    fam.family = "complete";
    fam.n = n;
    auto arrivals = std::make_shared<std::vector<Time>>(n, -1.0);
    SimSetup s;
    s.algorithm = "burst";
    s.topology = topology::generate(fam);
    s.cluster = &cluster;
    s.mode = Mode::cost;
    s.model_size = 1;
    s.steps = 1;
    s.protocol_factory = [arrivals](proto::PeerContext c) {
        return std::make_unique<Burst>(std::move(c), arrivals);
    };
    simulate(s);
    return {arrivals->begin() + 1, arrivals->end()};
}

}  // namespace

TEST_CASE("sim: four messages from one uplink arrive together when fair, one by one when fifo") {
    // S/B = 1 s each, latency 0.125 s.
    CHECK(burst(NetworkModel::fair) == std::vector<Time>{4.125, 4.125, 4.125, 4.125});
    CHECK(burst(NetworkModel::fifo) == std::vector<Time>{1.125, 2.125, 3.125, 4.125});
}
