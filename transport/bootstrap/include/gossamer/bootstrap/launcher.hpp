#pragma once
/// What a peer learns from the launcher that started it (docs/operations/cluster-launchers.md): its
/// rank, the job's size (checked against the topology), how many peers share its host, and where
/// rank 0 listens (the rendezvous) when the topology file gives only a peer count. Flags win over
/// the environment; every bad value throws ConfigError naming the flag or variable (one line,
/// exit status 2 in the CLI).

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gossamer/bootstrap/bootstrap.hpp"

namespace gossamer::bootstrap {

/// Rank 0's port when nothing names one (--rendezvous-port, GOSSAMER_RENDEZVOUS_PORT, the PORT
/// of HOST:PORT, MASTER_PORT).
inline constexpr int kDefaultRendezvousPort = 29450;
/// HOST[:PORT] of rank 0, for every launcher.
inline constexpr const char* kRendezvousVariable = "GOSSAMER_RENDEZVOUS";
/// Rank 0's port, when the host comes from the launcher (Slurm's node list, MASTER_ADDR).
inline constexpr const char* kRendezvousPortVariable = "GOSSAMER_RENDEZVOUS_PORT";

/// What the command line says (each unset when not given).
struct LaunchRequest {
    std::optional<int> rank;                ///< --rank
    std::optional<std::string> rendezvous;  ///< --rendezvous HOST[:PORT]
    std::optional<int> rendezvous_port;     ///< --rendezvous-port PORT
    std::optional<std::string> address;     ///< --address HOST: where this peer listens
    /// The topology file gives only a count: rank 0's host:port must come from a rendezvous.
    /// Otherwise the file names every peer's host:port and --rendezvous is refused.
    bool count_only = false;
};

/// What the launcher and the flags say about this peer.
struct Launch {
    int rank = 0;
    std::string rank_source;  ///< "--rank", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", ...
    /// Rank 0's endpoint; nullopt when the topology file names it or nothing gives one.
    std::optional<Endpoint> rendezvous;
    std::string rendezvous_source;  ///< "--rendezvous", "the first host of SLURM_STEP_NODELIST"
    std::optional<int> local_size;  ///< peers the launcher started on this host, when it says
};

/// Rank: --rank, else OMPI_COMM_WORLD_RANK (mpirun), PMI_RANK (PMI launchers), SLURM_PROCID
/// (srun), RANK (torchrun; only with MASTER_ADDR). The launcher's size (OMPI_COMM_WORLD_SIZE,
/// PMI_SIZE, SLURM_STEP_NUM_TASKS or SLURM_NTASKS, WORLD_SIZE) must equal `n`.
/// Rendezvous (count-only topologies): --rendezvous, GOSSAMER_RENDEZVOUS, then, for a rank from
/// the environment, MASTER_ADDR[:MASTER_PORT], the first host of Slurm's node list
/// (SLURM_STEP_NODELIST, SLURM_JOB_NODELIST), or 127.0.0.1 when mpirun or a PMI launcher put
/// every rank on this host. Throws ConfigError for a missing or bad rank, a size that differs
/// from `n`, a bad HOST:PORT or node list, --rendezvous with a file that lists hosts, and a
/// count-only job over several hosts whose rank 0 no variable names.
Launch discover_launch(const LaunchRequest& request, int n);

/// The peer list a count-only job passes to the bootstrap (Options::peers): rank 0's endpoint
/// at [0] (for rank 0 itself: `address`, else 0.0.0.0, on the rendezvous port), this peer's
/// bind address at [rank] (`address`, else 0.0.0.0, port 0: the kernel's choice) and port 0
/// (learnt at the rendezvous) for the others.
std::vector<Endpoint> rendezvous_peers(const Endpoint& rendezvous, int rank, int n,
                                       const std::optional<std::string>& address);

/// The peers the launcher says it started on this host, by the same launcher as the rank
/// (OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS, SLURM_STEP_TASKS_PER_NODE at SLURM_NODEID,
/// LOCAL_WORLD_SIZE); nullopt when it does not say or the value is unreadable.
std::optional<int> launcher_local_size();

/// "HOST", "HOST:PORT", "[V6]:PORT": the endpoint, with `default_port` when no port is given.
/// Throws ConfigError naming `source` for an empty host or a port outside 1..65535.
Endpoint parse_host_port(const std::string& text, const std::string& source, int default_port);

/// Expands a Slurm node list ("node[01-04,07]" -> node01 node02 node03 node04 node07;
/// "a1,b[2-3]"; "n[1-2]-ib,x" -> n1-ib n2-ib x; several bracket groups give their product).
/// A range keeps the zero padding of its lower bound. Throws ConfigError naming `source` for a
/// list that is empty, has an empty name, unbalanced or nested brackets, a bound that is not a
/// number, a reversed range, or more than `max_hosts` hosts.
std::vector<std::string> expand_nodelist(std::string_view list, const std::string& source,
                                         std::size_t max_hosts = 1u << 20);

}  // namespace gossamer::bootstrap
