#pragma once
/// The transport interface between one peer and the others (DESIGN.md, "Errors";
/// docs/modules/transport.md).
///
/// Threading: a Transport belongs to one thread, its *communication thread*. Every method except
/// wake() and the counters must be called there, and every callback runs there, from inside
/// progress() or wait() (never from inside send()). Backends assert this in debug builds.
///
/// Errors: setup (construction, connect) throws TransportError; the data path never throws,
/// completions carry a Status. A failure is isolated to its peer: once a peer fails, sends to it
/// complete with its error and every other peer is unaffected.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gossamer/transport/message.hpp"
#include "gossamer/transport/wire.hpp"

namespace gossamer::transport {

using Clock = std::chrono::steady_clock;
using Duration = std::chrono::milliseconds;

/// Error codes carried by completions.
enum class Errc : std::uint8_t {
    ok = 0,
    timeout,      ///< no completion within the operation's timeout (the peer is then failed)
    peer_failed,  ///< the peer is unreachable, vanished or was failed earlier
    closed,       ///< this transport was closed before the operation completed
};

std::string_view to_string(Errc e) noexcept;

/// The outcome of an operation: ok, or an error naming the peer and the reason.
struct Status {
    Errc code = Errc::ok;
    int peer = -1;
    std::string reason;  ///< one line, e.g. "peer 3: connection reset by remote peer"
    bool ok() const noexcept { return code == Errc::ok; }
};

/// Called once per send, after which the payload buffer may be reused.
using SendCallback = std::function<void(const Status&)>;
/// Called once per message that passed the header checks; the receiver owns msg.payload.
using ReceiveCallback = std::function<void(Message&& msg)>;
/// Called once per peer that fails (status names it and says why).
using PeerFailedCallback = std::function<void(const Status&)>;
/// Asked, for a message whose header passed the checks, where its payload should land: a
/// buffer of exactly 4 * header.elements bytes that stays valid and untouched by the receiver
/// until the message is delivered, or an empty span for a buffer of the transport's own.
using PlaceCallback = std::function<std::span<std::byte>(const Message& header)>;

/// Settings every backend shares.
struct TransportOptions {
    int rank = 0;
    int size = 1;
    std::uint64_t job_id = 0;
    Duration default_timeout{10'000};              ///< per operation, unless a send names its own
    std::uint64_t max_payload_bytes = 1ull << 32;  ///< larger announced payloads are dropped
};

/// Counters a backend keeps.
struct TransportCounters {
    std::uint64_t messages_sent = 0, messages_received = 0;
    std::uint64_t bytes_sent = 0, bytes_received = 0;  ///< payload bytes
};

class Transport {
  public:
    virtual ~Transport() = default;
    Transport(const Transport&) = delete;
    Transport& operator=(const Transport&) = delete;

    virtual std::string_view backend() const noexcept = 0;
    int rank() const noexcept { return options_.rank; }
    int size() const noexcept { return options_.size; }
    const TransportOptions& options() const noexcept { return options_; }

    /// Starts sending header fields of `header` (its payload vector is ignored; `receiver` names
    /// the peer, `sender` is set to rank()) followed by `payload`, whose size must be
    /// 4 * header.elements. `payload` must stay valid and unchanged until `done` fires, exactly
    /// once, with ok or an error. A timeout of zero means the context's default.
    virtual void send(const Message& header, std::span<const std::byte> payload, SendCallback done,
                      Duration timeout = Duration::zero()) = 0;

    /// Sets the receive callback; messages that arrive before it is set wait in the backend.
    virtual void on_receive(ReceiveCallback cb) = 0;
    /// Sets the callback told (from progress()) when a peer fails.
    void on_peer_failed(PeerFailedCallback cb) { on_failed_ = std::move(cb); }
    /// Sets the callback that may name where a payload lands (zero-copy receives). Called on
    /// the communication thread; a delivered message it placed has `placed` set and an empty
    /// payload. Backends that cannot place (inproc) never call it: receivers handle both.
    void on_place(PlaceCallback cb) { place_ = std::move(cb); }

    /// Hands a payload vector back for reuse by later receives (optional; saves allocation and,
    /// in the UCX backend, keeps receive buffers and their registrations across rounds).
    virtual void recycle(std::vector<float>&& buffer) = 0;

    /// Does the work that is ready and runs its callbacks; never blocks. Returns true when it
    /// did anything.
    virtual bool progress() = 0;
    /// Blocks until there may be work for progress(), wake() is called, or `max` passes, then
    /// runs progress(). Backends block on an event (the UCX worker's event fd) or spin.
    virtual void wait(Duration max) = 0;
    /// Any thread: ends a wait() early.
    virtual void wake() = 0;

    /// Fails `peer` now (e.g. the bootstrap's heartbeat says it vanished): its pending sends
    /// complete with peer_failed and later sends fail at once.
    virtual void fail_peer(int peer, std::string reason) = 0;
    /// Whether `peer` has failed; peer_status() says why (ok while it has not).
    bool peer_failed(int peer) const noexcept { return !peer_status(peer).ok(); }
    const Status& peer_status(int peer) const noexcept;

    /// Messages dropped by the header checks, per reason (any thread).
    const DropCounters& drops() const noexcept { return drops_; }
    /// Traffic so far (communication thread).
    const TransportCounters& counters() const noexcept { return counters_; }

    /// For conformance tests only: sends `header` bytes as they are (no encoding, no checks).
    virtual void send_raw_for_testing(int to, std::span<const std::byte> header,
                                      std::span<const std::byte> payload, SendCallback done) = 0;

  protected:
    explicit Transport(TransportOptions options);

    /// Decodes and checks a received header (from: the peer it came from, -1 when unknown;
    /// arrived: payload bytes that came, -1 when unknown). On a failed check, counts the drop and
    /// logs one line naming the peer and the reason (warn once per peer and reason, then debug).
    bool admit(std::span<const std::byte> header, int from, std::int64_t arrived, Message& m);
    /// Queues a callback to run at the next progress() (callbacks never run inside send()).
    void defer(SendCallback cb, Status status);
    /// Runs the deferred callbacks and peer-failure notices; returns how many ran.
    std::size_t run_deferred();
    /// A failure status for `peer` with a reason line "peer P: WHY".
    static Status failure(Errc code, int peer, std::string_view why);
    /// What a send to a failed peer completes with: its failure, as peer_failed.
    Status failed_status(int peer) const {
        Status s = peer_status(peer);
        if (s.code == Errc::timeout) s.code = Errc::peer_failed;
        return s;
    }
    /// Records that s.peer failed (the first reason sticks) and queues the on_peer_failed
    /// notice and a warning line; returns false when it had failed before.
    bool set_failed(Status s);
    /// Forgets that `peer` failed (a peer that joined the job again: readmit()).
    void clear_failed(int peer);

    TransportOptions options_;
    DropCounters drops_;
    TransportCounters counters_;
    PeerFailedCallback on_failed_;
    PlaceCallback place_;

  private:
    std::vector<std::pair<SendCallback, Status>> deferred_, running_;
    std::vector<Status> peer_status_;
    std::vector<Status> notices_;
    std::vector<std::uint32_t> drop_logged_;  // per peer + 1: bit per DropReason already warned
};

/// Waits (via progress/wait) until pred() holds or `timeout` passes; returns pred().
bool progress_until(Transport& t, const std::function<bool()>& pred, Duration timeout);

}  // namespace gossamer::transport
