#pragma once
/// The in-process backend: N peers as threads (or round-robin in one thread) of one process,
/// joined by a shared in-memory fabric. A send copies the payload into a buffer the receiver
/// owns and completes at the receiver's next progress() of the sender; a peer whose transport is
/// destroyed has left, and every other peer is told (on_peer_failed) and sees sends to it fail.

#include <memory>

#include "gossamer/transport/transport.hpp"

namespace gossamer::transport {

class InprocFabric;

/// A fabric for `size` peers; share it between the peers' transports. Thread-safe.
std::shared_ptr<InprocFabric> make_inproc_fabric(int size);

/// Joins `fabric` as options.rank (options.size must be the fabric's size). Throws
/// TransportError when the rank is taken or outside the fabric.
std::unique_ptr<Transport> make_inproc_transport(std::shared_ptr<InprocFabric> fabric,
                                                 TransportOptions options);

}  // namespace gossamer::transport
