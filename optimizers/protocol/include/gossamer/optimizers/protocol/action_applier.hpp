#pragma once
/// The one component that applies and checks a protocol's Actions for both drivers (the
/// simulator in virtual time, a real peer in real time): the order of their effects, the bound
/// on data messages in flight per edge (Protocol::one_in_flight_per_edge), deadlines never in
/// the past, done taken once, and which events a done peer still takes. The driver does the
/// rest (the network, the clock, the compute side, its logs) through an ActionTarget.

#include <cstdint>
#include <string_view>

#include "gossamer/optimizers/protocol/actions.hpp"
#include "gossamer/optimizers/protocol/in_flight.hpp"
#include "gossamer/optimizers/protocol/protocol.hpp"

namespace gossamer::proto {

/// What a driver does for each action. ActionApplier::apply calls these in this order:
/// refused (each refusal), send (each send, in the order of Actions::sends, after its check),
/// deadline (each), start_step, done.
class ActionTarget {
  public:
    /// A message the protocol refused: report it (its sender counts as failed from now on; the
    /// protocol took that failure itself, so peer_failed must not be delivered for it).
    virtual void refused(const Refusal& r) = 0;
    /// Hands `s` to the network (the target may move its message away). `counted`: it counts
    /// against its edge's bound; the driver calls ActionApplier::completed(receiver) when it
    /// completes.
    virtual void send(Send& s, bool counted) = 0;
    /// Delivers deadline_reached(id) at `at`, which is never before the apply's `now`.
    virtual void deadline(Time at, std::uint64_t id) = 0;
    /// Starts the next local step at Protocol::compute_point().
    virtual void start_step() = 0;
    /// The protocol's first done: this peer has taken its last step.
    virtual void done() = 0;

  protected:
    ~ActionTarget() = default;
};

/// One per peer, for the life of its protocol (reset() for a new incarnation).
class ActionApplier {
  public:
    /// How the edge-bound error names this driver's peer ("rank" or "peer"), and whether it
    /// gives the time of the send (the simulator's virtual time).
    struct Wording {
        std::string_view peer = "rank";
        bool timed = false;
    };
    ActionApplier() = default;  ///< a real peer's wording
    explicit ActionApplier(Wording wording) : wording_(wording) {}

    /// Applies `a`, the answer of `protocol` to an event at `now`, through `target`. Throws
    /// Error naming the protocol, the peer and the edge when a protocol that keeps at most one
    /// data message in flight per edge sends a second on one edge (the sends before it were
    /// handed over, the later actions are not applied).
    void apply(const Protocol& protocol, Time now, Actions& a, ActionTarget& target);
    /// A counted send to `receiver` completed: its edge may carry the next.
    void completed(int receiver) { edges_.completed(receiver); }
    /// Whether the protocol's done was applied.
    bool done() const noexcept { return done_; }
    /// Whether a due deadline is still delivered: not after done.
    bool takes_deadline() const noexcept { return !done_; }
    /// Whether a peer failure is still delivered: until done, and after it while the protocol
    /// is not settled (it still takes its neighbours' last messages).
    bool takes_failure(const Protocol& protocol) const { return !done_ || !protocol.settled(); }
    /// A new incarnation (a peer that rejoins after its crash): nothing in flight, not done.
    void reset() {
        edges_ = {};
        done_ = false;
    }

  private:
    Wording wording_;
    EdgeInFlight edges_;
    bool done_ = false;
};

}  // namespace gossamer::proto
