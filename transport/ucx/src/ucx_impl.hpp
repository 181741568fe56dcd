#pragma once
// The UCX backend's class, shared by its .cpp files (private: only transport/ucx/ sees UCX).
#include <ucp/api/ucp.h>

#include <array>
#include <atomic>
#include <list>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "gossamer/transport/ucx.hpp"

namespace gossamer::transport::ucx_detail {

inline constexpr unsigned kAmId = 7;
/// Eager payloads above kFragmentBytes go as fragments of at most kFragmentBytes, each its own
/// active message with id kFragmentAmId and a header of the wire header plus the message's number
/// on its edge and the fragment's offset (docs/modules/transport.md, "Eager in fragments"). Each
/// fits one UCT fragment of TCP (64 KiB), so UCP delivers it from its receive buffer instead of
/// assembling the whole message in a buffer it allocates first: one copy less on the receiver.
inline constexpr unsigned kFragmentAmId = 8;
inline constexpr std::size_t kFragmentBytes = std::size_t{60} << 10;
inline constexpr std::size_t kFragmentHeaderBytes = kHeaderBytes + 16;

inline std::string ucs(ucs_status_t s) {
    return ucs_status_string(s);
}

class Ucx;

struct SendOp {
    Ucx* self = nullptr;
    int peer = -1;
    std::array<std::byte, kFragmentHeaderBytes> header{};  // kHeaderBytes unless a fragment
    std::vector<std::byte> raw_header;                     // send_raw_for_testing
    std::uint64_t bytes = 0;
    void* request = nullptr;  // UCX's, while in flight
    SendCallback done;
    Clock::time_point deadline;
    std::list<SendOp*>::iterator pos;
    std::uint32_t gen = 0;  // the peer's incarnation it was sent to (readmit() counts them)
};

// A received message in its sender's delivery queue. Rendezvous data completes after eager
// messages that followed it, so messages wait in per-sender order until their data is in.
struct Slot {
    Message msg;
    bool ready = false;    // data complete
    bool dropped = false;  // the data never came (the sender failed meanwhile)
};

struct RecvOp {
    Ucx* self = nullptr;
    std::list<Slot>::iterator slot;
    int from = -1;
    std::uint64_t bytes = 0;
    std::uint32_t gen = 0;
};

struct EpErrArg {
    Ucx* self = nullptr;
    int peer = -1;
};

// An eager message arriving in fragments (kFragmentAmId), from its first fragment on.
struct Assembly {
    std::uint64_t id = 0;  // the sender's number of the message on this edge
    std::list<Slot>::iterator slot;
    std::byte* into = nullptr;  // the payload's place or pooled buffer
    std::uint64_t bytes = 0, arrived = 0;
};

struct Peer {
    ucp_ep_h ep = nullptr;
    std::uint64_t fragmented_sent = 0;  // numbers the fragmented messages sent to this peer
    std::vector<Assembly> assemblies;   // fragmented messages from this peer, incomplete
    std::list<Slot> inbox;              // received from this peer, in order
    std::list<SendOp*> pending;         // sends in flight, oldest first
    ucs_status_t error = UCS_OK;        // set by the endpoint error handler
    std::uint32_t gen = 0;              // incarnation: readmit() counts up
};

class Ucx final : public UcxTransport {
  public:
    explicit Ucx(const UcxOptions& o);
    ~Ucx() override;

    std::string_view backend() const noexcept override { return "ucx"; }
    std::vector<std::byte> address() const override { return address_; }
    void connect(const std::map<int, std::vector<std::byte>>& addresses) override;
    void readmit(int peer, const std::vector<std::byte>& blob) override;
    bool blocking() const noexcept override { return blocking_; }
    LargeMessages large_messages() const noexcept override { return large_; }
    UcxMemoryTypes memory_types() const override;  // ucx_memory.cpp

    void send(const Message& header, std::span<const std::byte> payload, SendCallback done,
              Duration timeout) override {
        if (large_ == LargeMessages::eager && payload.size() > kFragmentBytes &&
            payload.size() < kEagerLimit)
            return send_fragments(header, payload, std::move(done), timeout);
        auto* op = new SendOp;
        Message h = header;
        h.sender = rank();
        encode_header(h, options_.job_id, std::span(op->header).first<kHeaderBytes>());
        start(op, header.receiver, std::span(op->header).first(kHeaderBytes), payload,
              std::move(done), timeout);
    }
    void send_raw_for_testing(int to, std::span<const std::byte> header,
                              std::span<const std::byte> payload, SendCallback done) override {
        auto* op = new SendOp;
        op->raw_header.assign(header.begin(), header.end());
        start(op, to, op->raw_header, payload, std::move(done), Duration::zero());
    }

    void on_receive(ReceiveCallback cb) override { on_receive_ = std::move(cb); }
    void recycle(std::vector<float>&& buffer) override;
    bool progress() override;
    void wait(Duration max) override;
    void wake() override {
        woken_.store(true);
        // A spinning wait() sees woken_; ucp_worker_signal needs UCP_FEATURE_WAKEUP, which only
        // a blocking transport asks for (without it UCX prints an error on every call).
        if (blocking_) ucp_worker_signal(worker_);
    }
    void fail_peer(int peer, std::string reason) override {
        fail(failure(Errc::peer_failed, peer, reason), false);
    }

    // UCX callbacks (static trampolines below).
    ucs_status_t on_am(const void* header, std::size_t header_length, void* data,
                       std::size_t length, const ucp_am_recv_param_t* param);
    ucs_status_t on_fragment(const void* header, std::size_t header_length, void* data,
                             std::size_t length, const ucp_am_recv_param_t* param);
    void on_send_done(SendOp* op, void* request, ucs_status_t status);
    void on_recv_done(RecvOp* op, void* request, ucs_status_t status);
    void on_ep_error(int peer, ucp_ep_h ep, ucs_status_t status) {
        auto& p = peers_[static_cast<std::size_t>(peer)];
        if (ep != p.ep) return;  // an endpoint closed or replaced (readmit): not this peer's
        p.error = status;
        errors_pending_ = true;
    }

  private:
    SendOp* new_op();
    void free_op(SendOp* op);
    /// Posts one active message. `am_id` kFragmentAmId: a fragment, counted as a message only
    /// when `first`.
    void start(SendOp* op, int to, std::span<const std::byte> header,
               std::span<const std::byte> payload, SendCallback done, Duration timeout,
               unsigned am_id = kAmId, bool first = true);
    void send_fragments(const Message& header, std::span<const std::byte> payload,
                        SendCallback done, Duration timeout);  // ucx_fragments.cpp
    /// Drops `peer`'s incomplete fragmented messages (readmit: they belong to its earlier process).
    void drop_assemblies(int peer);
    /// Fails s.peer; `own`: this transport saw the failure (not fail_peer()), so the
    /// on_own_failure observer hears of it.
    void fail(Status s, bool own = true);
    void close_ep(int peer);
    void abandon_sends(int peer, const Status& status);
    void check_timeouts(Clock::time_point now);
    std::vector<float> take_buffer(std::size_t floats);
    void start_rndv_receive(void* desc, int from, std::list<Slot>::iterator slot,
                            std::uint64_t bytes, std::span<std::byte> place);
    std::size_t deliver();
    /// The reason a broken endpoint to `peer` gets: the known cause (the bootstrap's), else
    /// what UCX's status means for the peer process, without UCX's bare status string.
    std::string broken(int peer, ucs_status_t status, std::string_view what);

    ucp_context_h context_ = nullptr;
    ucp_worker_h worker_ = nullptr;
    int efd_ = -1;
    bool blocking_ = false;
    LargeMessages large_ = LargeMessages::rendezvous;  // resolved in the constructor
    bool peer_errors_ = true;                          // ErrorHandling::peer
    std::vector<SendOp*> spare_ops_;  // finished sends, reused: no allocation per send
    std::vector<SendOp*> abandoned_;  // released to UCX, which may still read their headers
    std::vector<std::byte> address_;
    std::vector<Peer> peers_;
    std::vector<EpErrArg> err_args_;  // sized once: endpoints point into it
    std::vector<void*> closing_;
    std::list<SendOp*> orphans_;  // sends to an earlier incarnation of a readmitted peer
    ReceiveCallback on_receive_;
    std::size_t ready_ = 0;  // slots ready for delivery (outside UCX callbacks)
    std::size_t recvs_in_flight_ = 0;
    std::size_t buffers_allocated_ = 0;  // receive buffers the pool did not have
    std::unordered_map<std::size_t, std::vector<std::vector<float>>> pool_;  // by length
    Clock::time_point next_deadline_ = Clock::time_point::max();
    unsigned progress_calls_ = 0;  // progress() checks send deadlines every 16th call
    bool errors_pending_ = false;
    bool closing_all_ = false;  // in the destructor: pending sends complete with `closed`
    std::thread::id owner_;
    std::atomic<bool> woken_{false};
    std::function<std::optional<std::string>(int)> known_cause_;
    std::function<void(int, const std::string&)> on_own_failure_;
};

/// UcxOptions::large, or GOSSAMER_UCX_LARGE, which wins; TransportError, one line, for a
/// GOSSAMER_UCX_LARGE it cannot read. Needs no context: called before ucp_init.
LargeMessages asked_large(const UcxOptions& o);
/// `asked` (asked_large) with automatic resolved against the resources of `context`.
LargeMessages resolve_large(const UcxOptions& o, LargeMessages asked, ucp_context_h context);

/// What ucp_context_query says `context` can move; TransportError when it cannot say.
UcxMemoryTypes memory_types_of(ucp_context_h context);

// UCX callbacks.
ucs_status_t am_cb(void* arg, const void* header, std::size_t header_length, void* data,
                   std::size_t length, const ucp_am_recv_param_t* param);
ucs_status_t fragment_cb(void* arg, const void* header, std::size_t header_length, void* data,
                         std::size_t length, const ucp_am_recv_param_t* param);
void send_cb(void* request, ucs_status_t status, void* user);
void recv_cb(void* request, ucs_status_t status, std::size_t length, void* user);
void ep_err_cb(void* arg, ucp_ep_h ep, ucs_status_t status);

}  // namespace gossamer::transport::ucx_detail
