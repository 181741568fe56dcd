// Shaping is real: rates read from the kernel's qdisc counters, not from the senders.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <string>
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

// The measured rate of `rate(w)` against its cap: never above 110% in any run, and at least 90%
// in one of up to three runs. A cap must hold every time; reaching it needs the senders to get
// the CPU, which a loaded 2-core machine (ctest -j2 beside another test) may deny for a
// window, so a low reading is measured again instead of failing on the first (it failed once
// at 86% of an 80 Mbit/s cap in a clean-clone CI run). A shaper that is too tight misses in all
// three.
template <typename Rate>
void check_near_cap(const lab::Lab& l, const std::vector<lab::Flow>& flows, double cap,
                    const char* what, Rate rate) {
    double best = 0;
    for (int attempt = 0; attempt < 3 && best < 0.90 * cap; ++attempt) {
        const auto w = saturate(l, flows);
        const double r = rate(w);
        MESSAGE(std::string(what) << ": " << r / 1e6 << " Mbit/s (run " << attempt + 1 << ")");
        CHECK(r <= 1.10 * cap);
        best = std::max(best, r);
    }
    CHECK(best >= 0.90 * cap);
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
        if (w.uplink[0] < 0.90 * 100e6)  // measured again, as check_near_cap says why
            check_near_cap(l, {{0, 1}}, 100e6, "uplink of peer 0",
                           [](const lab::WindowRates& x) { return x.uplink.at(0); });
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
        check_near_cap(l, {{0, 1}, {0, 2}}, 40e6, "0 -> 2",
                       [](const lab::WindowRates& w) { return w.downlink.at(2); });
        check_near_cap(l, {{0, 1}, {0, 2}}, 200e6, "uplink of 0",
                       [](const lab::WindowRates& w) { return w.uplink.at(0); });
    }

    TEST_CASE("shaping: a downlink cap holds two senders to it on the bridge port") {
        if (!have_netns()) return;
        lab::LabSpec s;
        s.peers = {{0, 0}, {0, 80e6}, {0, 0}};
        auto l = lab::Lab::create(s);
        check_near_cap(l, {{0, 1}, {2, 1}}, 80e6, "downlink of 1", [](const lab::WindowRates& w) {
            REQUIRE(w.downlink.size() == 3);
            return w.downlink[1];
        });
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
