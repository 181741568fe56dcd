#pragma once
/// What a lab is made of: its peers' caps (bits per second) and the names and addresses the
/// lab gives them. Pure functions; nothing here touches the system.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gossamer::lab {

/// A directed link cap: traffic from `from` to `to` shares `bits_per_s`.
struct LinkCap {
    int from = 0;
    int to = 0;
    double bits_per_s = 0.0;  ///< > 0
};

/// One peer's caps in bits per second; 0 means not capped.
struct PeerCaps {
    double uplink = 0.0;
    double downlink = 0.0;
};

/// A lab of peers.size() peers. The launcher (or `gossamer lab`) builds it; the simulator's
/// cluster file is converted by the CLI.
struct LabSpec {
    std::vector<PeerCaps> peers;
    std::vector<LinkCap> links;  ///< at most one per (from, to)
};

/// The most peers one lab holds: one /24, .1 to .250.
inline constexpr int kMaxPeers = 250;
/// Labs live in 10.213.S.0/24 for a slot S in [0, kSlots): one /24 per job.
inline constexpr int kSlots = 256;

/// Throws ConfigError("", what, ...) naming the peer or link when a spec cannot be built: no
/// peers, more than kMaxPeers, a negative or non-finite cap, a link to itself, out of range or
/// listed twice. `what` names the source (a flag or file) in the message.
void validate(const LabSpec& spec, const std::string& what);

/// The names and addresses of slot `slot`'s lab. Every interface name has at most 15
/// characters (the kernel's limit); all start with kPrefix so that `lab clean` finds them.
inline constexpr std::string_view kPrefix = "gsm";
std::string job_name(int slot);                ///< "gsm7"
std::string lab_netns(int slot);               ///< "gsm7-lab": holds the bridge
std::string peer_netns(int slot, int peer);    ///< "gsm7-p3"
std::string bridge_device(int slot);           ///< "gsm7br"
std::string peer_device(int slot, int peer);   ///< "gsm7p3": the peer's end of its veth
std::string bridge_port(int slot, int peer);   ///< "gsm7b3": the bridge's end of it
std::string peer_address(int slot, int peer);  ///< "10.213.7.4" (peer + 1)
std::string subnet(int slot);                  ///< "10.213.7.0/24"
/// The slot of a job name ("gsm7" or "7"); nullopt when it is not one.
std::optional<int> parse_job(std::string_view name);
/// The slot a namespace name belongs to ("gsm7-p3" -> 7); nullopt for other names.
std::optional<int> slot_of_netns(std::string_view name);

/// Parses a rate: a number with an optional unit bit, kbit, mbit, gbit (powers of 1000, per
/// second), case-insensitive, e.g. "100mbit", "1gbit", "2.5e8". nullopt when malformed or <= 0.
std::optional<double> parse_rate(std::string_view text);
/// "1 Gbit/s", "100 Mbit/s", "12.5 Mbit/s", "unlimited" for 0.
std::string format_rate(double bits_per_s);

}  // namespace gossamer::lab
