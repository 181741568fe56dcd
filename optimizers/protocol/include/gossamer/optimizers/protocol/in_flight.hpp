#pragma once
/// The drivers' check of Protocol::one_in_flight_per_edge (docs/algorithms/protocol-contract.md,
/// "The outbox"): per directed edge, the data messages in flight must all be chunks of one message
/// (the same edge_seq, sent in ascending chunk order), so a chunked share counts as one.

#include <cstdint>
#include <map>

#include "gossamer/transport/message.hpp"

namespace gossamer::proto {

class EdgeInFlight {
  public:
    /// Counts data message m on its edge; false (nothing counted) when another message than a
    /// later chunk of the one in flight is already in flight there.
    bool sent(const transport::Message& m) {
        Edge& e = edges_[m.receiver];
        if (e.count > 0 && (m.edge_seq != e.seq || m.chunk <= e.chunk)) return false;
        ++e.count;
        e.seq = m.edge_seq;
        e.chunk = m.chunk;
        return true;
    }
    /// A message counted on the edge to `receiver` completed.
    void completed(int receiver) {
        auto it = edges_.find(receiver);
        if (it != edges_.end() && it->second.count > 0) --it->second.count;
    }

  private:
    struct Edge {
        int count = 0;
        std::uint64_t seq = 0;
        std::uint32_t chunk = 0;
    };
    std::map<int, Edge> edges_;
};

}  // namespace gossamer::proto
