#pragma once
/// The exact average of the surviving peers' models after training (docs/modules/peer.md, "Exact
/// average"): one ring all-reduce (optimizers/ring.hpp's schedule) of (w·x, w) among the
/// survivors over the same transport, where w is the peer's push-sum mass (1 for averaging
/// protocols), so every survivor ends with Σ w_i x_i / Σ w_i, bitwise the same on all of them.
///
/// Its messages are MessageKind::reduce (chunks of the ring) and MessageKind::control (the
/// final acknowledgement) with a negative round derived from the survivor set, so they can never
/// be mistaken for a protocol's (rounds >= 0), and peers with different views of who survived
/// never mix their sums. Messages from peers that finished training first
/// arrive while this peer still trains: DriverOptions::intercept hands them over with
/// is_average_message().

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "gossamer/transport/transport.hpp"

namespace gossamer::peer {

struct AverageOptions {
    /// The whole average, from the call: it includes waiting for survivors still training.
    transport::Duration timeout{600'000};
    /// After this peer has its result: how long it waits for its ring successor to confirm it
    /// received everything (so this peer does not close its endpoints under a last message).
    transport::Duration linger{3'000};
    /// Called on the communication thread each time the wait wakes (JoinedPeer's
    /// apply_peer_losses). Empty: none.
    std::function<void()> poll;
    /// Whether a rank vanished (JoinedPeer: the bootstrap saw it go without a goodbye), checked
    /// each time the wait wakes: a survivor that vanishes stops the average with PeerFailure,
    /// even one this peer does not exchange chunks with, so the caller can start again over the
    /// remaining peers. Empty: only the ring neighbours' transport failures count.
    std::function<bool(int rank)> vanished;
};

struct AverageResult {
    std::vector<float> model;  ///< Σ w_i x_i / Σ w_i over the survivors
    double total_mass = 0;     ///< Σ w_i
};

/// True for the final average's messages (a negative round; protocols use rounds >= 0).
bool is_average_message(const transport::Message& m) noexcept;

/// Communication thread of `t`. `survivors`: the ranks taking part, ascending, this peer's
/// own rank among them (every survivor must pass the same list). `x`: this peer's model, `mass`
/// its push-sum weight (> 0). `pending`: in, the average's messages taken while this peer still
/// trained; out (however the call ends), those that belong to another survivor set, for a
/// retry over fewer peers. Throws PeerFailure when its ring predecessor, its successor (while
/// chunks are left to send) or a vanished survivor fails before this peer has its result, and
/// Timeout after options.timeout, naming the rank it waits for (and the ranks that averaged
/// over another survivor set, if any).
AverageResult exact_average(transport::Transport& t, std::span<const int> survivors,
                            std::span<const float> x, double mass,
                            std::vector<transport::Message>& pending,
                            const AverageOptions& options = {});

}  // namespace gossamer::peer
