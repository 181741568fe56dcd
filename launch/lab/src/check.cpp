// Calibration: every peer sends at once, rates from the qdiscs' own counters (check.hpp).
#include "gossamer/lab/check.hpp"

#include <chrono>
#include <string>
#include <thread>

#include "gossamer/core/error.hpp"
#include "gossamer/lab/blast.hpp"
#include "gossamer/lab/shaping.hpp"

namespace gossamer::lab {
namespace {

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

struct Sample {
    std::vector<std::uint64_t> up, down;
    // When each counter was read (the midpoint of its own `tc` call). Each counter has its
    // own time: under load one `tc` call can take hundreds of ms, and a downlink counter read
    // late against the pair's midpoint counted bytes over a longer time than the window said
    // (issue 37: a 40 Mbit/s class measured 52.7 under `ctest -j 4` on 2 busy cores).
    std::vector<double> up_at, down_at;
};

// Every peer's counters at once (a thread each): read one after another, the last peers of a
// large lab would be read long after the first.
Sample sample(int slot, int peers) {
    Sample s;
    s.up.resize(static_cast<std::size_t>(peers));
    s.down.resize(static_cast<std::size_t>(peers));
    s.up_at.resize(static_cast<std::size_t>(peers));
    s.down_at.resize(static_cast<std::size_t>(peers));
    std::vector<std::string> errors(static_cast<std::size_t>(peers));
    std::vector<std::thread> threads;
    for (int i = 0; i < peers; ++i)
        threads.emplace_back([&, i] {
            const auto k = static_cast<std::size_t>(i);
            try {
                const double t0 = now_s();
                s.up[k] = uplink_counters(slot, i).bytes;
                const double t1 = now_s();
                s.down[k] = downlink_counters(slot, i).bytes;
                s.up_at[k] = (t0 + t1) / 2;
                s.down_at[k] = (t1 + now_s()) / 2;
            } catch (const std::exception& e) {
                errors[k] = e.what();
            }
        });
    for (auto& t : threads) t.join();
    for (const auto& e : errors)
        if (!e.empty()) throw Error(e);
    return s;
}

// The smallest cap on the way from -> to (0: none).
double flow_cap(const LabSpec& spec, int from, int to) {
    double cap = 0;
    auto take = [&cap](double c) {
        if (c > 0 && (cap == 0 || c < cap)) cap = c;
    };
    take(spec.peers[static_cast<std::size_t>(from)].uplink);
    take(spec.peers[static_cast<std::size_t>(to)].downlink);
    for (const auto& l : spec.links)
        if (l.from == from && l.to == to) take(l.bits_per_s);
    return cap;
}

}  // namespace

WindowRates measure_window(int slot, int peers, double seconds) {
    const Sample a = sample(slot, peers);
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    const Sample b = sample(slot, peers);
    WindowRates w;
    w.seconds = seconds;
    for (int i = 0; i < peers; ++i) {
        const auto k = static_cast<std::size_t>(i);
        w.uplink.push_back(static_cast<double>(b.up[k] - a.up[k]) * 8.0 /
                           (b.up_at[k] - a.up_at[k]));
        w.downlink.push_back(static_cast<double>(b.down[k] - a.down[k]) * 8.0 /
                             (b.down_at[k] - a.down_at[k]));
    }
    return w;
}

CheckResult run_check(const LabSpec& spec, double seconds, double good) {
    Lab lab = Lab::create(spec);
    const int n = static_cast<int>(spec.peers.size());
    CheckResult result;
    result.job = lab.job();
    std::vector<Flow> flows;
    for (int i = 0; i < n && n > 1; ++i) flows.push_back({i, (i + 1) % n});
    // The window skips TCP's first quarter (slow start, the first queue filling) and ends
    // before the senders stop.
    WindowRates w;
    BlastOptions o;
    o.seconds = seconds;
    o.while_sending = [&] {
        std::this_thread::sleep_for(std::chrono::duration<double>(seconds * 0.25));
        w = measure_window(lab.slot(), n, seconds * 0.6);
    };
    const auto flows_done = blast(lab, flows, o);
    lab.stop();
    result.window_s = w.seconds;
    result.carries = !w.uplink.empty();
    for (int i = 0; i < n; ++i) {
        PeerRate r;
        r.peer = i;
        r.cap = flow_cap(spec, i, (i + 1) % n);
        if (i < static_cast<int>(w.uplink.size())) {
            r.measured = w.uplink[i];
            r.received = w.downlink[i];
        }
        for (const auto& f : flows_done)
            if (f.flow.from == i && !f.error.empty()) r.error = f.error;
        result.total += r.measured;
        if (!r.error.empty() || (r.cap > 0 && r.measured < good * r.cap)) result.carries = false;
        result.peers.push_back(r);
    }
    return result;
}

}  // namespace gossamer::lab
