#pragma once
// `gossamer launch --hosts netns` (docs/operations/lab.md): what changes for peers that run as
// hosts of a network-namespace lab. Private to launch/.

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "gossamer/launch/launch.hpp"

namespace gossamer::launch {

/// The topology file of a lab's peers, written to dir/topology.json: the user's, with peer r at
/// its lab address (each namespace has its own ports, so the ports stay).
std::string lab_topology(const LaunchJob& job, const std::filesystem::path& dir);

/// The cluster file of a lab's peers, written to dir/cluster.json: the user's with every
/// bandwidth (uplink, downlink, network and link bandwidth) at the largest value a cluster file
/// takes, so that the peers' own pacing never binds: the kernel shapes the rates. Latencies,
/// step times and failure times stay the peers' to emulate.
std::string lab_cluster(const LaunchJob& job, const std::filesystem::path& dir);

/// How peer `rank` starts in the lab: `ip netns exec NETNS` before its argv, and its UCX on its
/// own veth over TCP (shared memory between namespaces would bypass the shaped link), counting
/// every peer of the machine as local (they share its cores: UCX then blocks, not spins).
std::vector<std::string> lab_exec_prefix(const LaunchJob& job, int rank);
std::vector<std::pair<std::string, std::string>> lab_environment(const LaunchJob& job, int rank);

/// Where rank `rank` of a torch row (`ddp`, `diloco`: bench/ddp_ref.py, bench/diloco_ref.py)
/// meets the others through torch.distributed:
/// MASTER_ADDR (rank 0's address: its lab address, or its host in the topology file), a port
/// for MASTER_PORT and, in the lab, GLOO_SOCKET_IFNAME (its veth; else empty).
struct DdpRendezvous {
    std::string master_addr;
    int port = 0;
    std::string ifname;
};
DdpRendezvous ddp_rendezvous(const LaunchJob& job, int rank);

}  // namespace gossamer::launch
