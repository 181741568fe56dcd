#pragma once
/// The peer job of `gossamer peer` assembled from its checked inputs (docs/modules/peer.md): the
/// command line parses its flags and loads the files into a PeerJob, then, in this order,
/// place_peer, check_peer_job, load_peer_data, its own option checks, assemble_peer_job and
/// run_peer_job (job.hpp). Each throws ConfigError (one line, exit 2) before the peer joins or
/// writes anything.

#include "gossamer/bootstrap/launcher.hpp"
#include "gossamer/peer/job.hpp"

namespace gossamer::peer {

/// The rank from `where` or the launcher's environment (bootstrap::discover_launch); for a
/// topology file that gives only a count, the peers' addresses from the rendezvous at rank 0
/// (one line on stderr names it). `where.count_only` is taken from job.topology.
void place_peer(PeerJob& job, bootstrap::LaunchRequest where);

/// Refuses by the algorithm's name a leave_at of this rank in the cluster file or `--join` that
/// it cannot follow (docs/operations/elastic.md), and lists the ranks rank 0 does not await at
/// the start (the cluster file's join_at > 0, with min_peers).
void check_peer_job(PeerJob& job);

/// The training data, with the config's BLAS threads.
void load_peer_data(PeerJob& job);

/// The worker, the protocol (refused, with its options, where it cannot join or leave as asked),
/// a graceful leave on SIGTERM where it can, the settings the handshake compares, checkpoints
/// and resume (prepare_checkpoints), the driver options (driver_options), the trace file checked
/// and the output folder made ready for this peer's files.
void assemble_peer_job(PeerJob& job);

}  // namespace gossamer::peer
