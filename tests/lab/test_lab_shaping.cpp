// Shaping is real: rates read from the kernel's qdisc counters, not from the senders.
#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include "gossamer/core/error.hpp"
#include "gossamer/lab/blast.hpp"
#include "gossamer/lab/check.hpp"
#include "gossamer/lab/shaping.hpp"
#include "lab_support.hpp"

namespace lab = gossamer::lab;
using gossamer::test::have_netns;

namespace {

// Runs the flows for 2.5 s and reads the counters over [0.75 s, 2.25 s].
lab::WindowRates saturate(const lab::Lab& l, const std::vector<lab::Flow>& flows,
                          std::vector<lab::FlowResult>* results = nullptr) {
    lab::WindowRates w;
    lab::BlastOptions o;
    o.seconds = 2.5;
    o.while_sending = [&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(750));
        w = lab::measure_window(l.slot(), static_cast<int>(l.hosts().size()), 1.5);
    };
    auto r = lab::blast(l, flows, o);
    for (const auto& f : r) CHECK_MESSAGE(f.error.empty(), f.error);
    if (results) *results = r;
    return w;
}

}  // namespace

TEST_SUITE("lab") {
    TEST_CASE("shaping: a 100 Mbit/s uplink carries 90-110% of its cap by the kernel's counters") {
        if (!have_netns()) return;
        lab::LabSpec s;
        s.peers = {{100e6, 0}, {0, 0}};
        auto l = lab::Lab::create(s);
        std::vector<lab::FlowResult> flows;
        const auto w = saturate(l, {{0, 1}}, &flows);
        REQUIRE(w.uplink.size() == 2);
        MESSAGE("uplink of peer 0: " << w.uplink[0] / 1e6 << " Mbit/s over " << w.seconds << " s");
        CHECK(w.uplink[0] <= 1.10 * 100e6);
        CHECK(w.uplink[0] >= 0.90 * 100e6);
        // The bytes went through the shaped veth, not around it: the qdisc counted at least
        // every byte the receiver got (plus headers).
        const auto counted = lab::uplink_counters(l.slot(), 0).bytes;
        REQUIRE(flows.size() == 1);
        CHECK(flows[0].received > 10'000'000u);
        CHECK(counted >= flows[0].received);
        CHECK(lab::downlink_counters(l.slot(), 1).bytes >= flows[0].received);
    }

    TEST_CASE("shaping: a link cap (htb class by u32 on the destination) within a wider uplink") {
        if (!have_netns()) return;
        lab::LabSpec s;
        s.peers = {{200e6, 0}, {0, 0}, {0, 0}};
        s.links = {{0, 2, 40e6}};
        auto l = lab::Lab::create(s);
        const auto w = saturate(l, {{0, 1}, {0, 2}});
        REQUIRE(w.downlink.size() == 3);
        MESSAGE("0 -> 2: " << w.downlink[2] / 1e6 << " Mbit/s, uplink of 0: " << w.uplink[0] / 1e6);
        CHECK(w.downlink[2] <= 1.10 * 40e6);
        CHECK(w.downlink[2] >= 0.90 * 40e6);
        CHECK(w.uplink[0] <= 1.10 * 200e6);
        CHECK(w.uplink[0] >= 0.90 * 200e6);
    }

    TEST_CASE("shaping: a downlink cap holds two senders to it on the bridge port") {
        if (!have_netns()) return;
        lab::LabSpec s;
        s.peers = {{0, 0}, {0, 80e6}, {0, 0}};
        auto l = lab::Lab::create(s);
        const auto w = saturate(l, {{0, 1}, {2, 1}});
        REQUIRE(w.downlink.size() == 3);
        MESSAGE("downlink of 1: " << w.downlink[1] / 1e6 << " Mbit/s");
        CHECK(w.downlink[1] <= 1.10 * 80e6);
        CHECK(w.downlink[1] >= 0.90 * 80e6);
    }

    TEST_CASE("blast: flows stop at their byte bound, in time, and a flow to itself is refused") {
        if (!have_netns()) return;
        lab::LabSpec s;
        s.peers = {{0, 0}, {0, 0}};
        auto l = lab::Lab::create(s);
        const auto t0 = std::chrono::steady_clock::now();
        // Flow 0 -> 1 and flow 1 -> 0: both run, bounded in bytes.
        lab::BlastOptions o;
        o.seconds = 5;
        o.max_bytes = 1 << 20;
        const auto r = lab::blast(l, {{0, 1}, {1, 0}}, o);
        const double took =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        CHECK(took < 5 + o.connect_timeout_s + 3);
        for (const auto& f : r) {
            CHECK(f.error.empty());
            CHECK(f.sent == o.max_bytes);
            CHECK(f.received == o.max_bytes);
        }
        CHECK_THROWS_AS(lab::blast(l, {{0, 0}}, o), gossamer::Error);
    }
}
