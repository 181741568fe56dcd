#pragma once
/// What a protocol knows of its place in the job, its snapshots and its counters.
#include <cstdint>
#include <memory>
#include <vector>

#include "gossamer/optimizers/local/worker.hpp"
#include "gossamer/topology/schedule.hpp"

namespace gossamer {
struct Cluster;  // gossamer/core/cluster.hpp
}  // namespace gossamer

namespace gossamer::proto {

/// Everything a protocol knows about its place in the job.
struct PeerContext {
    int rank = 0;
    int n = 1;
    std::shared_ptr<const topology::Schedule> topology;  ///< graph and W of every round
    LocalWorker* worker = nullptr;                       ///< outlives the protocol
    std::int64_t max_steps = 0;                          ///< local steps to take
    /// The cluster file's links, for "chunk_bytes": "auto" (share_chunks.hpp); null when the
    /// job has none (shared memory, loopback, real links nobody described).
    std::shared_ptr<const Cluster> cluster = nullptr;
    /// The training config's guard.value_bound: a received model value beyond this many times
    /// the peer's own largest |x| (at least 1) is refused as a non-finite one is; 0 = off.
    double value_bound = 0;
};

/// One consistent cut of a peer (docs/operations/checkpoint.md): its worker's and its protocol's
/// state after `step` local steps, which every peer of the job takes at the same step.
struct Snapshot {
    std::int64_t step = 0;
    std::vector<char> state;
};

/// How a peer enters a running job (Protocol::join; docs/operations/elastic.md).
enum class Entry {
    fresh,   ///< a new peer: it takes half of its sponsor's model and mass
    rejoin,  ///< a crashed peer back: it keeps the worker's model, takes half the sponsor's mass
};

/// Counters every protocol keeps (the driver adds time-based ones).
struct ProtocolStats {
    std::uint64_t bytes_sent = 0, bytes_received = 0;
    std::uint64_t messages_sent = 0, messages_received = 0;
    std::int64_t rounds = 0;         ///< communication rounds completed
    double mass_lost = 0.0;          ///< push-sum: mass that went with failed peers
    std::int64_t staleness_max = 0;  ///< async: the stalest share absorbed, in own steps
    /// Messages refused for a non-finite value, and those dropped afterwards from the peers
    /// that sent them (docs/operations/reliability.md, "Non-finite values").
    std::uint64_t messages_refused = 0;
    /// bytes_sent split by Message::partition (index = partition id; whole-model protocols
    /// send everything as partition 0).
    std::vector<std::uint64_t> partition_bytes_sent;
};

}  // namespace gossamer::proto
