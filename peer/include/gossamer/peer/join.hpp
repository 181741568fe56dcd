#pragma once
/// Joining a job of real peers over UCX (docs/modules/peer.md, "Joining"): the bootstrap rendezvous
/// carries this peer's UCX worker address, the UCX transport connects to every other peer, and
/// the bootstrap's heartbeats keep watching the others. `gossamer peer` and `gossamer::Peer`
/// both start this way.
///
/// Threading: join() creates the transport on the calling thread, which becomes the transport's
/// communication thread (transport.hpp): run the Driver, apply_peer_losses() and everything else
/// that touches transport() there. The bootstrap reports losses on its own thread; JoinedPeer
/// only queues them there and wakes the transport, and apply_peer_losses() hands them to
/// Transport::fail_peer on the communication thread, as the transport's contract requires.

#include <cstddef>
#include <memory>
#include <vector>

#include "gossamer/bootstrap/bootstrap.hpp"
#include "gossamer/transport/ucx.hpp"

namespace gossamer::peer {

struct JoinOptions {
    /// Rank, the endpoint list (rank r listens at peers[r]), job id, token, model size, layout
    /// and the bootstrap's timeouts (join, io, heartbeats); docs/modules/bootstrap.md.
    bootstrap::Options bootstrap;
    /// Progress mode, error handling, send timeout (default_timeout), local_peers. Its rank, size
    /// and job_id are set from `bootstrap` by join().
    transport::UcxOptions ucx;
    /// Enter a job that is already running (Bootstrap::join, `gossamer peer --join`) instead of
    /// taking part in its start-up barrier.
    bool running = false;
};

/// One peer that has joined: it owns the bootstrap (control plane: heartbeats, goodbyes) and the
/// connected UCX transport (data plane). Destroying it leaves the job on purpose: the transport
/// closes first, then the bootstrap says goodbye, so the others see this peer *leave* (a
/// PeerLoss with `left` set), which JoinedPeer never turns into a transport failure. A process
/// that dies without destroying it (a crash, SIGKILL, std::_Exit) *vanishes*: the others'
/// bootstraps notice the reset connection or the missing heartbeats, and their JoinedPeer fails it
/// in their transports.
class JoinedPeer {
  public:
    ~JoinedPeer();
    JoinedPeer(const JoinedPeer&) = delete;
    JoinedPeer& operator=(const JoinedPeer&) = delete;

    int rank() const noexcept;
    int size() const noexcept;
    /// The connected transport (communication thread only, see above).
    transport::UcxTransport& transport() noexcept { return *transport_; }
    bootstrap::Bootstrap& bootstrap() noexcept { return *bootstrap_; }

    /// Communication thread: calls Transport::fail_peer for every peer the bootstrap reported
    /// *vanished* since the last call (peers that left with a goodbye are not failed), and
    /// UcxTransport::readmit for every peer that joined the job again; returns how many failed.
    /// Cheap when there is nothing to do: call it whenever the loop wakes (DriverOptions::poll).
    std::size_t apply_peer_losses();

    /// Communication thread: leaves without a goodbye, as a crash would: the others see this
    /// peer *vanish* and fail it at once. For a peer that stops on an error (the all-reduce
    /// baseline on a failed peer, a timeout), so that no other peer waits on it until a timeout.
    /// It first keeps the transport and the bootstrap running for kAbandonLinger, so that the
    /// loss that made it stop (which rank 0 forwards) reaches the others before its own. The
    /// transport and the bootstrap are gone afterwards; only losses() and vanished() may still
    /// be called.
    void abandon();
    static constexpr transport::Duration kAbandonLinger{500};

    /// Any thread: every loss the bootstrap reported so far, goodbyes included, in order.
    std::vector<bootstrap::PeerLoss> losses() const;
    /// Any thread: the ranks that vanished (not those that left), in the order noticed.
    std::vector<int> vanished() const;

    struct Relay;

  private:
    friend std::unique_ptr<JoinedPeer> join(JoinOptions options);
    JoinedPeer() = default;

    int rank_ = 0, size_ = 0;
    std::shared_ptr<Relay> relay_;             // shared with the bootstrap thread's callback
    std::vector<bootstrap::PeerLoss> losses_;  // kept by abandon()
    std::unique_ptr<bootstrap::Bootstrap> bootstrap_;
    std::unique_ptr<transport::UcxTransport> transport_;
};

/// Joins the job: creates the UCX transport (on this thread), binds the bootstrap listener,
/// runs the rendezvous with the transport's address (the start-up barrier: blocks at most about
/// join_timeout + io_timeout), connects to every other peer's address and starts relaying lost
/// peers. Throws bootstrap::BootstrapError (refused handshake, missing peers, port in use...),
/// TransportError (UCX cannot start, a malformed or unreachable address) or ConfigError (bad
/// timeouts); each message is one line naming the ranks concerned.
std::unique_ptr<JoinedPeer> join(JoinOptions options);

/// The send timeout of a peer whose model has `parameters` parameters: 10 s plus what four
/// model-sized fp32 messages take at 8 Mbit/s (1e6 bytes/s). A send's deadline counts from when
/// it is posted, so it includes the sends queued before it on the same endpoint: a fixed 10 s
/// failed healthy neighbours of a 23 MB model behind a 100 Mbit/s link (docs/operations/lab.md). A
/// hung peer is still found by the bootstrap's heartbeats within their timeout.
transport::Duration send_timeout(std::uint64_t parameters);

}  // namespace gossamer::peer
