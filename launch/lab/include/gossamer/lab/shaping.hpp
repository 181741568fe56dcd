#pragma once
/// The kernel's side of the lab: the tc commands that shape a peer's links, and the byte
/// counters read back from its qdiscs. This kernel has htb, tbf, u32 and ifb, but no netem,
/// flower or matchall: rates are shaped here, latency stays emulated by the peer.
///
/// Peer i's uplink is an htb qdisc on its own veth end (in its namespace): class 1:1 carries the
/// uplink cap (or kUnlimited), a default leaf 1:2 and one leaf per capped link, chosen by a u32
/// filter on the destination address. Its downlink is an htb qdisc on the bridge's end of the
/// veth (in the lab namespace), whose egress is everything the peer receives.

#include <cstdint>
#include <string>
#include <vector>

#include "gossamer/lab/spec.hpp"

namespace gossamer::lab {

/// The rate htb gets for a peer without a cap (bits/s): above anything a veth carries here.
inline constexpr double kUnlimited = 100e9;

/// The tc commands (argv lists, each starting "tc") that shape peer `peer` of slot `slot`.
/// Every peer gets an uplink qdisc, capped or not, so that its bytes are always counted.
std::vector<std::vector<std::string>> shaping_commands(const LabSpec& spec, int slot, int peer);

/// The bytes and packets the root qdisc of a device has sent: parsed from `tc -s qdisc show
/// dev D` output (its "root" line's "Sent N bytes M pkt"). Throws Error when there is none.
struct QdiscCounters {
    std::uint64_t bytes = 0;
    std::uint64_t packets = 0;
};
QdiscCounters parse_root_counters(const std::string& tc_output, const std::string& device);

/// Reads the counters of a peer's uplink qdisc (on its veth, in its namespace) or of its
/// downlink qdisc (on the bridge port, in the lab namespace).
QdiscCounters uplink_counters(int slot, int peer);
QdiscCounters downlink_counters(int slot, int peer);

}  // namespace gossamer::lab
