#pragma once
/// Calibration (`gossamer lab check`): every peer sends at once to its ring successor and the
/// rate each reaches is read from the kernel's qdisc counters, against its cap.

#include <string>
#include <vector>

#include "gossamer/lab/lab.hpp"

namespace gossamer::lab {

struct PeerRate {
    int peer = 0;
    /// The cap of its flow to peer + 1, bits/s (0: none): the smallest of its uplink, the
    /// next peer's downlink and their link's cap.
    double cap = 0.0;
    double measured = 0.0;  ///< bits/s through its uplink qdisc over the window
    double received = 0.0;  ///< bits/s through its downlink qdisc over the window
    std::string error;      ///< the flow's error, if it failed
};

struct CheckResult {
    std::string job;
    double window_s = 0.0;  ///< length of the measurement window
    std::vector<PeerRate> peers;
    double total = 0.0;  ///< sum of measured, bits/s
    /// Whether every capped flow reached at least `good` of its cap (and no flow failed).
    bool carries = false;
};

/// Builds a lab of `spec`, runs the check for `seconds` (the window is its middle, skipping
/// TCP's start), tears the lab down and returns the rates. `good` is the fraction of the cap a
/// peer must reach (0.9). Throws what Lab::create throws.
CheckResult run_check(const LabSpec& spec, double seconds, double good = 0.9);

/// Reads peer rates over a window while traffic runs: counters before, sleep, counters after.
/// Returns bits/s for each peer's uplink and downlink.
struct WindowRates {
    std::vector<double> uplink, downlink;
    double seconds = 0.0;
};
WindowRates measure_window(int slot, int peers, double seconds);

}  // namespace gossamer::lab
