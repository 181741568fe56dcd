#pragma once
/// The topology file (JSON; docs/formats/topology-format.md): the peers and the graph with its
/// weights. Loading validates everything and throws ConfigError naming the file, the JSON path, the
/// problem and the fix.

#include <optional>
#include <string>
#include <vector>

#include "gossamer/core/json.hpp"
#include "gossamer/topology/schedule.hpp"

namespace gossamer::topology {

struct PeerAddress {
    std::string host;
    int port = 0;
};

struct Topology {
    std::string source;                        ///< the file it came from
    std::vector<PeerAddress> peers;            ///< rank r listens at peers[r]
    std::shared_ptr<const Schedule> schedule;  ///< graph and weights of every round
    std::optional<FamilySpec> family;          ///< set when the graph is a generated family
    WeightRule weights = WeightRule::uniform;
    /// The file gives only a count ("peers": {"count": N}): a peer may find rank 0 through a
    /// rendezvous instead of the count form's default addresses (docs/formats/topology-format.md).
    bool count_only = false;
    int n() const { return static_cast<int>(peers.size()); }
};

/// Loads and validates a topology file.
Topology load_topology(const std::string& path);
/// Validates a parsed document (the Document's label names the file in errors).
Topology parse_topology(const json::Document& doc);

/// Peers on one host with consecutive ports, as `gossamer topo gen` writes them.
struct LocalPeers {
    std::string host = "127.0.0.1";
    int base_port = 29500;
};

/// The topology file for a generated family (what `gossamer topo gen` prints).
json::Json family_topology_json(const FamilySpec& spec, const LocalPeers& peers);

}  // namespace gossamer::topology
