#pragma once
/// The cluster file (JSON; docs/formats/cluster-format.md): how fast every peer computes (base
/// time, factor, jitter, slow periods, failure) and how fast every link carries bytes (latency,
/// bandwidth, per-peer uplink and downlink). Loading validates everything and throws ConfigError
/// naming the file, the JSON path, the problem and the fix. It lives in core/ because three
/// modules read it: sim/ (virtual time), peer/ (the emulation of a real peer) and launch/
/// (docs/architecture.md, "The cluster file lives in core").

#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gossamer/core/json.hpp"

namespace gossamer {

/// Seconds: virtual time under sim (the same unit as proto::Time), the driver's clock under a
/// real peer.
using Time = double;

/// "Never": the failure time of a peer that does not fail, the end of an open slow period.
inline constexpr Time never = std::numeric_limits<Time>::infinity();

/// The distribution of the multiplicative jitter J of a step's compute time; E[J] = 1 always.
enum class JitterKind {
    constant,   ///< J = 1
    lognormal,  ///< J = exp(sigma Z - sigma^2 / 2), Z standard normal (mean 1, median < 1)
    uniform,    ///< J uniform on [1 - width, 1 + width)
};

/// The ranges the loader accepts (docs/formats/cluster-format.md, "Ranges"): values past them are
/// refused, so that no virtual time or emulated pause runs into the billions of years.
inline constexpr Time kMaxStepTime = 86400;    ///< base_time and base_time x factor: a day, s
inline constexpr Time kMaxLatency = 86400;     ///< a link's latency: a day, s
inline constexpr Time kMaxTimePoint = 1e9;     ///< fail_at, slow from and to: about 31.7 years, s
inline constexpr double kMaxFactor = 1e4;      ///< factor and slow factors
inline constexpr double kMaxSigma = 3;         ///< lognormal jitter (E[J^2] = exp(sigma^2) ~ 8100)
inline constexpr double kMinBandwidth = 1;     ///< bytes/s, of links, uplinks and downlinks
inline constexpr double kMaxBandwidth = 1e15;  ///< bytes/s (8 Pbit/s)

struct Jitter {
    JitterKind kind = JitterKind::constant;
    double sigma = 0.0;  ///< lognormal: standard deviation of ln J, >= 0
    double width = 0.0;  ///< uniform: half-width, in [0, 1)
};

/// From `from` to `to` (virtual seconds) the peer works at rate 1 / factor: the part of a step's
/// work that falls inside the period takes `factor` times as long.
struct SlowPeriod {
    Time from = 0.0;
    Time to = never;
    double factor = 1.0;  ///< >= 1
};

/// Everything the cluster says about one peer, defaults and overrides resolved.
struct PeerSpec {
    Time base_time = 0.0;  ///< seconds per local step at factor 1, > 0
    double factor = 1.0;   ///< multiplies the step time (4 = four times slower), > 0
    Jitter jitter;
    std::vector<SlowPeriod> slow;  ///< sorted by `from`, disjoint
    Time fail_at = never;          ///< the peer stops at this time (a crash: its mass is lost)
    /// Elastic jobs (docs/operations/elastic.md): the peer is absent until join_at and then enters
    /// the running job; it leaves gracefully (handing its state over) at leave_at; after fail_at it
    /// comes back at rejoin_at. The loader checks join_at < fail_at < rejoin_at < leave_at.
    Time join_at = 0.0;
    Time leave_at = never;
    Time rejoin_at = never;
    double uplink = 0.0;    ///< bytes/s its sends share, > 0
    double downlink = 0.0;  ///< bytes/s its receives share, > 0
};

/// How `gossamer sim` shares the network between the messages in flight
/// (docs/formats/cluster-format.md, "Timing"); the cluster file's `network.model`.
enum class NetworkModel {
    fair,  ///< max-min fair sharing among the flows active at each instant (TCP under htb)
    fifo,  ///< one message at a time per uplink and per downlink, at its bottleneck rate
};

/// "fair" or "fifo".
const char* to_string(NetworkModel m);
/// The model named `name` ("fair", "fifo"), or nullopt.
std::optional<NetworkModel> network_model_from(std::string_view name);

/// One directed link.
struct LinkSpec {
    Time latency = 0.0;      ///< seconds, >= 0
    double bandwidth = 0.0;  ///< bytes/s, > 0
};

/// A rack (network.racks): its members share one uplink out of the rack and one downlink into
/// it. A message between two different racks also crosses the sender's rack uplink and the
/// receiver's rack downlink (docs/formats/cluster-format.md, "Racks").
struct RackSpec {
    std::vector<int> ranks;  ///< sorted; a rank is in at most one rack
    double uplink = 0.0;     ///< bytes/s shared by every flow leaving the rack, > 0
    double downlink = 0.0;   ///< bytes/s shared by every flow entering the rack, > 0
};

/// A cluster resolved for n peers.
struct Cluster {
    std::string source;                               ///< the file it came from ("" if built)
    std::vector<PeerSpec> peers;                      ///< one per rank
    LinkSpec default_link;                            ///< every link without an override
    NetworkModel network_model = NetworkModel::fair;  ///< how sim shares links between flows
    std::map<std::pair<int, int>, LinkSpec> links;    ///< overrides by (from, to), resolved
    /// Seconds until the others hear that a peer failed (network.failure_detection): 0, a
    /// killed process whose reset connection says so at once; a vanished host is noticed only
    /// after the heartbeat timeout (5 s for real peers, docs/modules/bootstrap.md).
    Time failure_detection = 0.0;
    std::vector<RackSpec> racks;  ///< network.racks; empty: no shared rack links
    std::vector<int> rack_of;     ///< per rank: its index in racks, -1 for none (or empty)

    int n() const { return static_cast<int>(peers.size()); }
    /// Whether any peer joins late, leaves or rejoins (docs/operations/elastic.md).
    bool has_churn() const;
    /// The link from -> to: its override, or the default.
    const LinkSpec& link(int from, int to) const;
    /// The rack of `rank` (an index into racks), or -1 when it is in none.
    int rack(int rank) const {
        return rack_of.empty() ? -1 : rack_of[static_cast<std::size_t>(rank)];
    }
    /// Whether a message from -> to crosses rack links: they are in different racks, one of
    /// them at least in a rack.
    bool crosses_racks(int from, int to) const {
        const int a = rack(from), b = rack(to);
        return a != b;
    }
};

/// Loads and validates a cluster file for a topology of `n` peers (n >= 1). Ranks named by
/// overrides must lie in [0, n); a file with an "n" key fits only that n.
Cluster load_cluster(const std::string& path, int n);
/// Validates a parsed document (the Document's label names the file in errors).
Cluster parse_cluster(const json::Document& doc, int n);

/// n identical peers: constant jitter, no slow periods or failures, every link and every
/// uplink and downlink with the same latency and bandwidth. For tests and quick runs.
Cluster homogeneous_cluster(int n, Time base_time, Time latency, double bandwidth);

}  // namespace gossamer
