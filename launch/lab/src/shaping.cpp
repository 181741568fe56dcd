// The tc commands of a peer's links and its qdisc counters (shaping.hpp).
#include "gossamer/lab/shaping.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "gossamer/core/error.hpp"
#include "gossamer/lab/system.hpp"

namespace gossamer::lab {
namespace {

std::string bits(double rate) {
    return fmt::format("{}bit", std::llround(rate));
}

// htb's quantum (bytes a class sends per turn when borrowing): fixed, so that the kernel does
// not derive an out-of-range one from a large rate.
constexpr const char* kQuantum = "60000";

std::vector<std::string> tc(const std::string& netns, std::vector<std::string> rest) {
    std::vector<std::string> argv{"tc", "-n", netns};
    argv.insert(argv.end(), rest.begin(), rest.end());
    return argv;
}

// Each leaf gets a byte-bounded FIFO: about 50 ms of its rate (at least 256 KiB, a few GSO
// packets). htb's default leaf queue (1000 packets of up to 64 KiB on a veth) holds seconds of
// data at 50 Mbit/s, and the ACKs of the flow in the other direction, which share the uplink,
// wait behind it: TCP then stalls and the cap is not reached.
std::vector<std::string> leaf_queue(const std::string& netns, const std::string& dev,
                                    const std::string& classid, double rate) {
    const double limit = std::max(256.0 * 1024, rate / 8.0 * 0.05);
    return tc(netns, {"qdisc", "add", "dev", dev, "parent", classid, "bfifo", "limit",
                      fmt::format("{}", std::llround(limit))});
}

// The htb tree of one capped direction: 1:1 holds the cap; the leaves' guaranteed rates sum
// to it (a leaf within its rate does not ask its parent), each borrows up to its ceiling. A
// tenth is reserved for small packets (TCP's ACKs, leaf 1:3, served first): a peer sends and
// receives at once, and ACKs queued behind data slow down the flow in the other direction
// (without this class, the reverse flow of a saturated pair reached 66% of its cap). Leaf 1:2
// takes the rest; returns its guaranteed rate, shared with `more_leaves` leaves to come.
double capped_root(std::vector<std::vector<std::string>>& cmds, const std::string& ns,
                   const std::string& dev, double cap, std::size_t more_leaves) {
    const double acks = cap / 10;
    const double share = (cap - acks) / static_cast<double>(more_leaves + 1);
    cmds.push_back(
        tc(ns, {"qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "2"}));
    cmds.push_back(tc(ns, {"class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb",
                           "rate", bits(cap), "ceil", bits(cap), "quantum", kQuantum}));
    cmds.push_back(tc(ns, {"class", "add", "dev", dev, "parent", "1:1", "classid", "1:2", "htb",
                           "rate", bits(share), "ceil", bits(cap), "quantum", kQuantum}));
    cmds.push_back(leaf_queue(ns, dev, "1:2", cap));
    cmds.push_back(
        tc(ns, {"class", "add", "dev", dev, "parent", "1:1", "classid", "1:3", "htb", "rate",
                bits(acks), "ceil", bits(cap), "quantum", kQuantum, "prio", "0"}));
    cmds.push_back(leaf_queue(ns, dev, "1:3", acks));
    // IPv4 packets shorter than 128 bytes (total length & 0xff80 == 0): ACKs and the like.
    cmds.push_back(
        tc(ns, {"filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1", "u32",
                "match", "u16", "0x0000", "0xff80", "at", "2", "flowid", "1:3"}));
    return share;
}

}  // namespace

std::vector<std::vector<std::string>> shaping_commands(const LabSpec& spec, int slot, int peer) {
    std::vector<std::vector<std::string>> cmds;
    const auto& caps = spec.peers.at(static_cast<std::size_t>(peer));
    const double up = caps.uplink > 0 ? caps.uplink : kUnlimited;
    std::vector<LinkCap> links;
    for (const auto& l : spec.links)
        if (l.from == peer) links.push_back(l);
    std::sort(links.begin(), links.end(), [](const auto& a, const auto& b) { return a.to < b.to; });

    // Uplink, on the peer's own veth end.
    const std::string ns = peer_netns(slot, peer), dev = peer_device(slot, peer);
    const double share = capped_root(cmds, ns, dev, up, links.size());
    for (const auto& l : links) {
        const double ceil = std::min(l.bits_per_s, up);
        const std::string id = fmt::format("1:{:x}", 0x100 + l.to);
        cmds.push_back(
            tc(ns, {"class", "add", "dev", dev, "parent", "1:1", "classid", id, "htb", "rate",
                    bits(std::min(share, ceil)), "ceil", bits(ceil), "quantum", kQuantum}));
        cmds.push_back(leaf_queue(ns, dev, id, ceil));
        cmds.push_back(
            tc(ns, {"filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "2",
                    "u32", "match", "ip", "dst", peer_address(slot, l.to) + "/32", "flowid", id}));
    }

    // Downlink: what the bridge sends into the peer's veth, on the bridge's end.
    const double down = caps.downlink > 0 ? caps.downlink : kUnlimited;
    capped_root(cmds, lab_netns(slot), bridge_port(slot, peer), down, 0);
    return cmds;
}

QdiscCounters parse_root_counters(const std::string& tc_output, const std::string& device) {
    std::stringstream ss(tc_output);
    std::string line;
    bool in_root = false;
    while (std::getline(ss, line)) {
        if (line.rfind("qdisc ", 0) == 0) {
            in_root = line.find(" root ") != std::string::npos;
            continue;
        }
        if (!in_root) continue;
        const auto sent = line.find("Sent ");
        if (sent == std::string::npos) continue;
        std::stringstream fields(line.substr(sent + 5));
        QdiscCounters c;
        std::string bytes_word, pkt_word;
        if (fields >> c.bytes >> bytes_word >> c.packets >> pkt_word && bytes_word == "bytes" &&
            pkt_word == "pkt")
            return c;
        break;
    }
    throw Error(fmt::format("no root qdisc counters for {} in tc's output", device));
}

QdiscCounters uplink_counters(int slot, int peer) {
    const auto dev = peer_device(slot, peer);
    return parse_root_counters(
        run_checked({"tc", "-n", peer_netns(slot, peer), "-s", "qdisc", "show", "dev", dev}), dev);
}

QdiscCounters downlink_counters(int slot, int peer) {
    const auto dev = bridge_port(slot, peer);
    return parse_root_counters(
        run_checked({"tc", "-n", lab_netns(slot), "-s", "qdisc", "show", "dev", dev}), dev);
}

}  // namespace gossamer::lab
