#pragma once
// How gossamer::Peer joins its job and leaves it, one backend per file: api_inproc.cpp (threads
// of one process) and api_ucx.cpp (real processes: TCP bootstrap, then UCX).

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gossamer/bootstrap/clock.hpp"
#include "gossamer/bootstrap/settings.hpp"
#include "gossamer/core/partition.hpp"
#include "gossamer/peer.hpp"
#include "gossamer/topology/topology_file.hpp"
#include "gossamer/transport/transport.hpp"

namespace gossamer::api {

using Clock = std::chrono::steady_clock;

/// What a peer brings to the start-up handshake.
struct JoinRequest {
    int rank = 0;
    const topology::Topology* topology = nullptr;
    const PeerOptions* options = nullptr;
    std::uint64_t model_size = 0;
    PartitionLayout layout;
    /// Topology, algorithm and its options, partitions, final average (peer/settings.hpp).
    std::vector<bootstrap::Setting> settings;
};

/// A joined peer: its transport (used on the thread that joined) and the way out.
class Connection {
  public:
    virtual ~Connection() = default;
    virtual transport::Transport& transport() = 0;
    /// On the joining thread, after the driver returned. `finished`: this peer took its last
    /// step, so it waits (until `deadline`) for every other peer to finish or leave before its
    /// transport goes, as a finished process stays reachable until the job ends; otherwise it
    /// leaves at once. Throws Timeout past the deadline (then leaves anyway).
    virtual void close(bool finished, Clock::time_point deadline) = 0;
    /// On the joining thread, whenever the driver's loop wakes (DriverOptions::poll).
    virtual void poll() {}
    /// This peer's clock against rank 0's (DriverOptions::clock_offset).
    virtual bootstrap::ClockOffset clock_offset() const = 0;
    /// On the joining thread: the ranks not lost so far, ascending, this one among them.
    virtual std::vector<int> survivors() {
        std::vector<int> out;
        auto& t = transport();
        for (int q = 0; q < t.size(); ++q)
            if (q == t.rank() || !t.peer_failed(q)) out.push_back(q);
        return out;
    }
};

/// Joins over the in-process fabric of `job`: every peer checks the others' model size,
/// partitions and settings against rank 0's, as the bootstrap's handshake does. Throws
/// ConfigError (a mismatch, one line naming the field and both values; a job of another size),
/// TransportError (rank taken) or Timeout (peers that did not join within join_timeout, named).
std::unique_ptr<Connection> join_inproc(InprocJob& job, const JoinRequest& request);
/// Joins real peers: the TCP bootstrap at the topology file's endpoints, then UCX. Throws
/// ConfigError where Gossamer was built without UCX.
std::unique_ptr<Connection> join_ucx(const JoinRequest& request);

}  // namespace gossamer::api
