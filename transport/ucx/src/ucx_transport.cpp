// UCP active messages: the 88-byte wire header travels as the AM header, the payload as AM data.
// Why AM and not tags: docs/modules/transport.md. Everything here runs on the communication thread
// (UCS_THREAD_MODE_SINGLE), except wake(), which uses the thread-safe ucp_worker_signal.
#include <fmt/format.h>
#include <poll.h>

#include <algorithm>
#include <array>
#include <cassert>
#include <cstdlib>
#include <cstring>
#include <list>
#include <thread>
#include <unordered_map>

#include "blob.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/core/log.hpp"
#include "ucx_impl.hpp"

namespace gossamer::transport {
namespace ucx_detail {

// -- trampolines ------------------------------------------------------------------------------

void send_cb(void* request, ucs_status_t status, void* user) {
    auto* op = static_cast<SendOp*>(user);
    op->self->on_send_done(op, request, status);
}
void ep_err_cb(void* arg, ucp_ep_h ep, ucs_status_t status) {
    auto* a = static_cast<EpErrArg*>(arg);
    a->self->on_ep_error(a->peer, ep, status);
}

// -- setup ------------------------------------------------------------------------------------

Ucx::Ucx(const UcxOptions& o) : UcxTransport(o), peers_(static_cast<std::size_t>(o.size)) {
    owner_ = std::this_thread::get_id();
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const int local = o.local_peers > 0 ? o.local_peers : o.size;
    peer_errors_ = o.errors == ErrorHandling::peer;
    known_cause_ = o.known_cause;
    on_own_failure_ = o.on_own_failure;
    blocking_ =
        o.mode == ProgressMode::block || (o.mode == ProgressMode::automatic && local > cores);

    const LargeMessages asked = asked_large(o);  // before ucp_init: a bad value leaks nothing
    ucp_config_t* config = nullptr;
    if (auto s = ucp_config_read(nullptr, nullptr, &config); s != UCS_OK)
        throw TransportError(
            fmt::format("ucx: rank {}: cannot read the UCX configuration: {}", o.rank, ucs(s)));
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
    // WAKEUP only where wait() blocks on the event fd (see wait()).
    params.features = UCP_FEATURE_AM | (blocking_ ? UCP_FEATURE_WAKEUP : 0);
    params.mt_workers_shared = 0;
    const auto s = ucp_init(&params, config, &context_);
    ucp_config_release(config);
    if (s != UCS_OK)
        throw TransportError(fmt::format("ucx: rank {}: ucp_init failed: {}", o.rank, ucs(s)));

    large_ = resolve_large(o, asked, context_);

    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    if (blocking_) {
        wp.field_mask |= UCP_WORKER_PARAM_FIELD_EVENTS;
        wp.events = UCP_WAKEUP_TX | UCP_WAKEUP_RX;
    }
    if (auto ws = ucp_worker_create(context_, &wp, &worker_); ws != UCS_OK) {
        ucp_cleanup(context_);
        throw TransportError(
            fmt::format("ucx: rank {}: cannot create a worker: {}", o.rank, ucs(ws)));
    }
    auto cleanup = [&](const std::string& what) {
        ucp_worker_destroy(worker_);
        ucp_cleanup(context_);
        throw TransportError(fmt::format("ucx: rank {}: {}", o.rank, what));
    };
    if (blocking_)
        if (auto es = ucp_worker_get_efd(worker_, &efd_); es != UCS_OK)
            cleanup("no worker event fd: " + ucs(es));

    ucp_am_handler_param_t ap{};
    ap.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                    UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
    ap.id = kAmId;
    ap.cb = am_cb;
    ap.arg = this;
    ap.flags = UCP_AM_FLAG_WHOLE_MSG;
    if (auto hs = ucp_worker_set_am_recv_handler(worker_, &ap); hs != UCS_OK)
        cleanup("cannot set the active-message handler: " + ucs(hs));
    ap.id = kFragmentAmId;  // eager payloads in fragments (ucx_fragments.cpp)
    ap.cb = fragment_cb;
    if (auto hs = ucp_worker_set_am_recv_handler(worker_, &ap); hs != UCS_OK)
        cleanup("cannot set the fragments' active-message handler: " + ucs(hs));

    ucp_address_t* addr = nullptr;
    std::size_t len = 0;
    if (auto as = ucp_worker_get_address(worker_, &addr, &len); as != UCS_OK)
        cleanup("no worker address: " + ucs(as));
    address_ = ucx_blob::frame(o.job_id, o.rank, {reinterpret_cast<const std::byte*>(addr), len});
    ucp_worker_release_address(worker_, addr);
    err_args_.resize(peers_.size());
}

void Ucx::connect(const std::map<int, std::vector<std::byte>>& addresses) {
    assert(std::this_thread::get_id() == owner_);
    for (const auto& [r, blob] : addresses) {
        if (r == rank()) continue;
        if (r < 0 || r >= size())
            throw TransportError(fmt::format("ucx: rank {}: address for peer {} outside [0, {})",
                                             rank(), r, size()));
        auto unpacked = ucx_blob::unframe(blob, options_.job_id, r);
        if (!unpacked.ok)
            throw TransportError(fmt::format("ucx: rank {}: cannot connect to peer {}: {}", rank(),
                                             r, unpacked.error));
        auto& p = peers_[static_cast<std::size_t>(r)];
        if (p.ep) close_ep(r);
        auto& arg = err_args_[static_cast<std::size_t>(r)];
        arg = {this, r};
        ucp_ep_params_t ep{};
        ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
        ep.address = reinterpret_cast<const ucp_address_t*>(unpacked.address.data());
        ep.err_mode = peer_errors_ ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
        if (peer_errors_) {
            ep.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
            ep.err_handler.cb = ep_err_cb;
            ep.err_handler.arg = &arg;
        }
        if (auto s = ucp_ep_create(worker_, &ep, &p.ep); s != UCS_OK) {
            p.ep = nullptr;
            throw TransportError(fmt::format(
                "ucx: rank {}: cannot connect to peer {}: unreachable ({})", rank(), r, ucs(s)));
        }
        if (std::getenv("GOSSAMER_UCX_PRINT_EP")) ucp_ep_print_info(p.ep, stderr);  // lanes chosen
    }
}

void Ucx::readmit(int peer, const std::vector<std::byte>& blob) {
    assert(std::this_thread::get_id() == owner_);
    if (peer < 0 || peer >= size() || peer == rank())
        throw TransportError(fmt::format("ucx: rank {}: cannot readmit peer {}", rank(), peer));
    // What the earlier process was sent or sent: its completions and its data no longer
    // concern the peer (the incarnation counts up); connect() closes its endpoint.
    auto& p = peers_[static_cast<std::size_t>(peer)];
    connect({{peer, blob}});
    ++p.gen;
    p.error = UCS_OK;
    orphans_.splice(orphans_.end(), p.pending);
    for (auto& slot : p.inbox) slot.dropped = true;
    drop_assemblies(peer);
    clear_failed(peer);
    log::debug("transport ucx: rank {}: peer {} readmitted with a new address", rank(), peer);
}

Ucx::~Ucx() {
    log::debug("transport ucx: rank {}: {} messages received, {} receive buffers allocated", rank(),
               counters_.messages_received, buffers_allocated_);
    closing_all_ = true;
    on_receive_ = nullptr;
    for (int r = 0; r < size(); ++r) {
        if (!peer_errors_ && peer_failed(r)) continue;  // a flush to a dead peer never ends
        close_ep(r);
    }
    const auto end = Clock::now() + std::chrono::seconds(2);
    while ((!closing_.empty() || recvs_in_flight_ > 0) && Clock::now() < end) progress();
    for (int r = 0; r < size(); ++r)  // what UCX did not complete in time completes here
        abandon_sends(r,
                      failure(Errc::closed, r, "the transport closed before the send completed"));
    for (auto* op : orphans_) {  // sends to an earlier incarnation that never completed
        ucp_request_free(op->request);
        defer(std::move(op->done),
              failure(Errc::closed, op->peer, "the transport closed before the send completed"));
        abandoned_.push_back(op);
    }
    orphans_.clear();
    for (auto* req : closing_) ucp_request_free(req);  // flushes that did not end in time
    on_failed_ = nullptr;
    run_deferred();
    ucp_worker_destroy(worker_);
    ucp_cleanup(context_);
    for (auto* op : abandoned_) delete op;
    for (auto* op : spare_ops_) delete op;
}

// -- sending ----------------------------------------------------------------------------------

SendOp* Ucx::new_op() {
    if (spare_ops_.empty()) return new SendOp;
    auto* op = spare_ops_.back();
    spare_ops_.pop_back();
    return op;
}

void Ucx::free_op(SendOp* op) {
    op->done = nullptr;
    op->raw_header.clear();
    op->request = nullptr;
    if (spare_ops_.size() < 256)
        spare_ops_.push_back(op);
    else
        delete op;
}

void Ucx::start(SendOp* op, int to, std::span<const std::byte> header,
                std::span<const std::byte> payload, SendCallback done, Duration timeout,
                unsigned am_id, bool first) {
    assert(std::this_thread::get_id() == owner_);
    op->self = this;
    op->peer = to;
    op->done = std::move(done);
    op->bytes = payload.size();
    if (to < 0 || to >= size() || to == rank()) {
        defer(std::move(op->done), failure(Errc::peer_failed, to, "no such peer to send to"));
        free_op(op);
        return;
    }
    auto& p = peers_[static_cast<std::size_t>(to)];
    op->gen = p.gen;
    if (peer_failed(to) || !p.ep) {
        if (!p.ep && !peer_failed(to))
            set_failed(failure(Errc::peer_failed, to, "unreachable: not connected"));
        defer(std::move(op->done), failed_status(to));
        free_op(op);
        return;
    }
    ucp_request_param_t rp{};
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                      UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_FLAGS;
    rp.cb.send = send_cb;
    rp.user_data = op;
    rp.datatype = ucp_dt_make_contig(1);
    // Eager over TCP below kEagerLimit; elsewhere UCX picks by size (UCX_RNDV_THRESH).
    rp.flags =
        large_ == LargeMessages::eager && payload.size() < kEagerLimit ? UCP_AM_SEND_FLAG_EAGER : 0;
    if (am_id == kFragmentAmId) rp.flags = UCP_AM_SEND_FLAG_EAGER;
    void* req = ucp_am_send_nbx(p.ep, am_id, header.data(), header.size(), payload.data(),
                                payload.size(), &rp);
    if (first) counters_.messages_sent++;
    counters_.bytes_sent += payload.size();
    if (req == nullptr) {  // done at once: the payload was copied or sent
        defer(std::move(op->done), Status{});
        free_op(op);
        return;
    }
    if (UCS_PTR_IS_ERR(req)) {
        fail(failure(Errc::peer_failed, to, broken(to, UCS_PTR_STATUS(req), "a send failed")));
        defer(std::move(op->done), failed_status(to));
        free_op(op);
        return;
    }
    op->deadline = Clock::now() + (timeout > Duration::zero() ? timeout : options_.default_timeout);
    next_deadline_ = std::min(next_deadline_, op->deadline);
    op->request = req;
    op->pos = p.pending.insert(p.pending.end(), op);
}

void Ucx::on_send_done(SendOp* op, void* request, ucs_status_t status) {
    ucp_request_free(request);
    auto& p = peers_[static_cast<std::size_t>(op->peer)];
    if (op->gen != p.gen) {
        // Sent to the incarnation before a readmit: it never concerns the peer as it is now.
        orphans_.erase(op->pos);
        defer(std::move(op->done), status == UCS_OK
                                       ? Status{}
                                       : failure(Errc::peer_failed, op->peer,
                                                 "the send went to the peer's earlier process"));
        free_op(op);
        return;
    }
    p.pending.erase(op->pos);
    Status st;
    if (status != UCS_OK && closing_all_ && !peer_failed(op->peer)) {
        st = failure(Errc::closed, op->peer, "the transport closed before the send completed");
    } else if (status != UCS_OK) {
        if (!peer_failed(op->peer))
            fail(failure(Errc::peer_failed, op->peer, broken(op->peer, status, "a send failed")));
        st = peer_status(op->peer);
    }
    defer(std::move(op->done), std::move(st));
    free_op(op);
}

// UCX says how an endpoint broke, not why: a peer killed with SIGKILL and one that hangs both
// give "Endpoint timeout" over TCP loopback. The bootstrap, which watches the process's own
// connection, usually knows better by now; otherwise say what the status means for the peer.
std::string Ucx::broken(int peer, ucs_status_t status, std::string_view what) {
    log::debug("transport ucx: rank {}: peer {}: {}: UCX status {}", rank(), peer, what,
               ucs(status));
    if (known_cause_)
        if (auto cause = known_cause_(peer)) return *cause;
    switch (status) {
        case UCS_ERR_CONNECTION_RESET:
            return fmt::format(
                "{}: the UCX connection was reset by the peer: its process went "
                "away (exited, crashed or was killed)",
                what);
        case UCS_ERR_ENDPOINT_TIMEOUT:
            return fmt::format(
                "{}: the peer stopped answering UCX: its process went away "
                "(exited, crashed or was killed) or hangs",
                what);
        case UCS_ERR_UNREACHABLE:
        case UCS_ERR_REJECTED:
            return fmt::format(
                "{}: UCX cannot reach the peer ({}): its process is gone or its "
                "host is down",
                what, ucs(status));
        default:
            return fmt::format("{}: UCX reported \"{}\"; the peer process may have gone away", what,
                               ucs(status));
    }
}

void Ucx::fail(Status s, bool own) {
    const int peer = s.peer;
    if (!set_failed(std::move(s))) return;
    if (own && on_own_failure_) on_own_failure_(peer, peer_status(peer).reason);
    if (peer_errors_)
        close_ep(peer);
    else
        abandon_sends(peer, peer_status(peer));
}

// Without UCX error handling an endpoint cannot be force-closed, and its requests may never
// complete: their callbacks run now with `status`, and the requests go back to UCX
// (ucp_request_free: no callback after it). Their headers stay allocated until the worker goes.
void Ucx::abandon_sends(int peer, const Status& status) {
    auto& p = peers_[static_cast<std::size_t>(peer)];
    for (auto* op : p.pending) {
        ucp_request_free(op->request);
        op->request = nullptr;
        defer(std::move(op->done), status);
        abandoned_.push_back(op);
    }
    p.pending.clear();
}

// With UCX error handling, force-closes the endpoint: UCX then completes its outstanding sends
// with an error, which on_send_done turns into the peer's failure status. Without, flushes.
void Ucx::close_ep(int peer) {
    auto& p = peers_[static_cast<std::size_t>(peer)];
    if (!p.ep) return;
    ucp_request_param_t rp{};
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    rp.flags = peer_errors_ ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    void* req = ucp_ep_close_nbx(p.ep, &rp);
    p.ep = nullptr;
    if (UCS_PTR_IS_PTR(req) && req != nullptr) closing_.push_back(req);
}

void Ucx::check_timeouts(Clock::time_point now) {
    if (now < next_deadline_) return;
    next_deadline_ = Clock::time_point::max();
    for (int r = 0; r < size(); ++r) {
        auto& p = peers_[static_cast<std::size_t>(r)];
        for (auto* op : p.pending) {
            if (now >= op->deadline) {
                fail(failure(Errc::timeout, r,
                             fmt::format("a send of {} bytes did not complete within its timeout",
                                         op->bytes)));
                break;
            }
            next_deadline_ = std::min(next_deadline_, op->deadline);
        }
    }
}

}  // namespace ucx_detail

std::unique_ptr<UcxTransport> make_ucx_transport(const UcxOptions& options) {
    return std::make_unique<ucx_detail::Ucx>(options);
}

}  // namespace gossamer::transport
