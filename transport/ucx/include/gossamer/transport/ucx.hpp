#pragma once
/// The UCX backend: UCP active messages over whatever transports UCX finds (shared memory and
/// TCP here, InfiniBand/RoCE where present; `ucx_info -d` lists them, UCX_TLS restricts them).
/// Small payloads go eagerly; large ones by rendezvous straight into the receiver's buffer
/// where RDMA or shared memory carries them, eagerly over TCP (docs/modules/transport.md). This
/// header includes no UCX header.
///
/// Start-up: every peer calls address(), the blobs travel (the bootstrap, or in-process in
/// tests), then every peer calls connect() with the blobs of the others.

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gossamer/transport/transport.hpp"

namespace gossamer::transport {

/// How wait() waits.
enum class ProgressMode {
    automatic,  ///< block when local_peers exceeds the cores, else spin
    spin,       ///< poll the worker in a loop (lowest latency, one busy core per peer)
    block,      ///< sleep on the worker's event fd (ucp_worker_arm) until something arrives
};

/// How a peer's failure is noticed (docs/modules/transport.md, "Error handling and shared memory").
enum class ErrorHandling {
    /// UCP_ERR_HANDLING_MODE_PEER: UCX reports broken endpoints (connection reset, keepalive),
    /// failed endpoints are force-closed. UCX 1.13 has no peer-failure support in its shared
    /// memory transports, so peers on one host then talk over TCP loopback.
    peer,
    /// No UCX error handling: shared memory is used between peers on one host; a failed peer is
    /// noticed only by send timeouts (or fail_peer() from the bootstrap's heartbeats).
    none,
};

/// How a large payload travels (docs/modules/transport.md, "Eager and rendezvous").
/// `eager` applies below kEagerLimit: from 32 MiB on, UCX 1.13's eager path falls to about a
/// tenth of its speed (ucx_perftest ucp_am_bw over TCP loopback: 1.9-2.4 GB/s at 16-24 MiB,
/// 0.2-0.3 GB/s at 32-64 MiB), so such payloads keep UCX's choice.
inline constexpr std::size_t kEagerLimit = std::size_t{32} << 20;
enum class LargeMessages {
    /// eager where only TCP carries the traffic between peers, else UCX's choice by size
    automatic,
    /// UCX's choice by size (`UCX_RNDV_THRESH`): rendezvous above the threshold
    rendezvous,
    /// always eager: the data goes at once, without the receiver's go-ahead
    eager,
};

/// The transports of a UCP context as ucp_context_print_info lists its resources ("tcp",
/// "posix", "rc_mlx5", ...; each once, in the order listed).
std::vector<std::string> ucx_resource_names(std::string_view context_info);

/// `automatic` resolved: rendezvous where a transport with remote memory access (InfiniBand,
/// RoCE, ...) is present, or where peers share memory (`shared_memory`: no UCX error handling
/// and every peer on this host) and a shared-memory transport is; else eager. Over TCP a
/// rendezvous buys no zero copy: its go-ahead queues behind the data that the receiver is
/// itself sending on the same connection, and a peer that sends and receives at once (gossip)
/// saw its uplink idle while its downlink carried a neighbour's model (docs/modules/transport.md).
/// `asked` other than automatic is returned as it is.
LargeMessages resolve_large_messages(LargeMessages asked, const std::vector<std::string>& names,
                                     bool shared_memory);

/// "automatic", "rendezvous" or "eager"; nullopt for anything else.
std::optional<LargeMessages> parse_large_messages(std::string_view text);
const char* to_string(LargeMessages m) noexcept;

struct UcxOptions : TransportOptions {
    ProgressMode mode = ProgressMode::automatic;
    /// The environment's GOSSAMER_UCX_LARGE (automatic|rendezvous|eager), when set, wins.
    LargeMessages large = LargeMessages::automatic;
    int local_peers = 0;  ///< peers on this host (0: assume size)
    ErrorHandling errors = ErrorHandling::peer;
    /// Optional (communication thread): asked when UCX reports a broken endpoint to `peer`. A
    /// line it returns (the bootstrap's "rank 2 ... vanished: ...", which knows why) becomes the
    /// failure's reason instead of what UCX's status suggests. Must be quick and must not call
    /// back into the transport.
    std::function<std::optional<std::string>(int peer)> known_cause;
    /// Optional (communication thread): told when this transport fails a peer on its own (a
    /// send timeout, a broken endpoint), not through fail_peer(), with the failure's line. The
    /// peer reports it to the job (Bootstrap::report_failure): a failure only one transport saw,
    /// as on a cut edge, must become one the job agrees on. Quick; must not call back into the
    /// transport.
    std::function<void(int peer, const std::string& why)> on_own_failure;
};

/// The memory types a UCP context supports, as ucp_context_query reports them
/// (UCP_ATTR_FIELD_MEMORY_TYPES): which kinds of buffer UCX itself can send from and receive
/// into. Debian's UCX (built without CUDA) reports host only.
struct UcxMemoryTypes {
    bool host = false, cuda = false, cuda_managed = false, rocm = false, rocm_managed = false;
    std::string names;  ///< UCX's names of those types, e.g. "host, cuda, cuda-managed"
};

class UcxTransport : public Transport {
  public:
    /// This peer's worker address, framed with a check (opaque; travels to the other peers).
    virtual std::vector<std::byte> address() const = 0;
    /// Creates the endpoints to every rank in `addresses` (its own entry is ignored). Throws
    /// TransportError naming the peer when a blob is malformed or the peer is unreachable.
    virtual void connect(const std::map<int, std::vector<std::byte>>& addresses) = 0;
    /// A peer that failed and joined the job again (a restarted process: a new worker and
    /// blob): replaces its endpoint and forgets the failure, so sends and receives work again.
    /// Throws TransportError like connect(); the peer then stays failed.
    virtual void readmit(int peer, const std::vector<std::byte>& blob) = 0;
    /// Whether wait() blocks (ProgressMode resolved).
    virtual bool blocking() const noexcept = 0;
    /// How large payloads travel (UcxOptions::large resolved: rendezvous or eager).
    virtual LargeMessages large_messages() const noexcept = 0;
    /// The memory types this transport's UCP context can move (see query_ucx_memory_types()).
    virtual UcxMemoryTypes memory_types() const = 0;

  protected:
    using Transport::Transport;
};

/// Asks UCX: creates a throwaway UCP context with the features the transport uses (active
/// messages), queries it and cleans it up. Throws TransportError, one line, when UCP cannot be
/// initialised; a build without CUDA support is an answer (cuda = false), not an error.
UcxMemoryTypes query_ucx_memory_types();

/// The path a device buffer takes to a peer (docs/operations/gpu.md, "Which transfer path runs"):
/// "ucx-cuda" when UCP reports CUDA memory, else "staging" (through pinned host memory).
const char* device_transfer_path(const UcxMemoryTypes& types) noexcept;

/// UCX's version, as the library loaded at run time reports it (e.g. "1.13.1").
std::string ucx_version();

/// Creates the UCP context and worker. Throws TransportError when UCX cannot start.
std::unique_ptr<UcxTransport> make_ucx_transport(const UcxOptions& options);

}  // namespace gossamer::transport
