// Receiving and progress. The header is checked inside the UCX callback before the payload is
// touched; rendezvous payloads are then fetched straight into a pooled buffer of the
// receiver's, without an extra copy.
#include <fmt/format.h>
#include <poll.h>

#include <algorithm>
#include <cassert>
#include <cstring>

#include "gossamer/core/log.hpp"
#include "ucx_impl.hpp"

namespace gossamer::transport::ucx_detail {

ucs_status_t am_cb(void* arg, const void* header, std::size_t header_length, void* data,
                   std::size_t length, const ucp_am_recv_param_t* param) {
    return static_cast<Ucx*>(arg)->on_am(header, header_length, data, length, param);
}

void recv_cb(void* request, ucs_status_t status, std::size_t, void* user) {
    auto* op = static_cast<RecvOp*>(user);
    op->self->on_recv_done(op, request, status);
}

ucs_status_t Ucx::on_am(const void* header, std::size_t header_length, void* data,
                        std::size_t length, const ucp_am_recv_param_t* param) {
    Message m;
    const std::span<const std::byte> h(static_cast<const std::byte*>(header), header_length);
    // A dropped rendezvous message returns UCS_OK: UCX discards it and completes the sender.
    if (!admit(h, -1, static_cast<std::int64_t>(length), m)) return UCS_OK;
    if (peer_failed(m.sender)) {  // its weight is gone; nothing late is applied
        drops_.add(DropReason::not_member);
        return UCS_OK;
    }
    counters_.messages_received++;
    counters_.bytes_received += length;
    const int from = m.sender;
    auto& inbox = peers_[static_cast<std::size_t>(from)].inbox;
    // Where the payload lands: a place the receiver names (zero-copy), or a pooled buffer.
    std::span<std::byte> place;
    if (place_ && length > 0) {
        place = place_(m);
        if (!place.empty() && place.size() != length) {
            log::warn(
                "transport ucx: rank {}: a receive place of {} bytes for a payload of {}; "
                "using a buffer of the transport's",
                rank(), place.size(), length);
            place = {};
        }
        m.placed = !place.empty();
    }
    auto slot = inbox.insert(inbox.end(), Slot{std::move(m)});
    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
        start_rndv_receive(data, from, slot, length, place);
        return UCS_INPROGRESS;  // the descriptor now belongs to ucp_am_recv_data_nbx
    }
    if (!place.empty()) {
        std::memcpy(place.data(), data, length);  // eager, placed: copy once, into its place
    } else {
        slot->msg.payload = take_buffer(length / sizeof(float));
        if (length) std::memcpy(slot->msg.payload.data(), data, length);  // eager: copy once
    }
    slot->ready = true;
    ++ready_;
    return UCS_OK;
}

// Fetches a rendezvous payload straight into a receive buffer (or the receiver's own place),
// from inside the handler (as ucx_perftest does): the transfer starts without waiting for the
// next progress call.
void Ucx::start_rndv_receive(void* desc, int from, std::list<Slot>::iterator slot,
                             std::uint64_t bytes, std::span<std::byte> place) {
    auto* op = new RecvOp{this, slot, from, bytes, peers_[static_cast<std::size_t>(from)].gen};
    void* into = place.data();
    if (place.empty()) {
        slot->msg.payload = take_buffer(bytes / sizeof(float));
        into = slot->msg.payload.data();
    }
    ucp_request_param_t rp{};
    rp.op_attr_mask =
        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_DATATYPE;
    rp.cb.recv_am = recv_cb;
    rp.user_data = op;
    rp.datatype = ucp_dt_make_contig(1);
    void* req = ucp_am_recv_data_nbx(worker_, desc, into, bytes, &rp);
    if (req == nullptr)
        on_recv_done(op, nullptr, UCS_OK);
    else if (UCS_PTR_IS_ERR(req))
        on_recv_done(op, nullptr, UCS_PTR_STATUS(req));
    else
        ++recvs_in_flight_;
}

void Ucx::on_recv_done(RecvOp* op, void* request, ucs_status_t status) {
    if (request) {
        --recvs_in_flight_;
        ucp_request_free(request);
    }
    op->slot->ready = true;
    ++ready_;
    if (status != UCS_OK) {
        const int from = op->from;
        op->slot->dropped = true;
        if (!op->slot->msg.placed) recycle(std::move(op->slot->msg.payload));
        // Runs inside UCX: the peer is failed from progress(), like an endpoint error.
        if (!peer_failed(from) && op->gen == peers_[static_cast<std::size_t>(from)].gen) {
            peers_[static_cast<std::size_t>(from)].error = status;
            errors_pending_ = true;
        }
    }
    delete op;
}

std::vector<float> Ucx::take_buffer(std::size_t floats) {
    if (auto it = pool_.find(floats); it != pool_.end() && !it->second.empty()) {
        auto v = std::move(it->second.back());
        it->second.pop_back();
        return v;
    }
    ++buffers_allocated_;
    return std::vector<float>(floats);
}

// Buffers are pooled by length: gossip sends the same sizes every round, so a neighbour's
// message lands in the buffer of an earlier round, whose UCX registration (where a transport
// needs one) is still in UCX's registration cache.
// At most 256 MiB and 1024 buffers per length are kept (at least one). A pipelined all-reduce
// has 2 * chunks messages of one length in flight per round (64 at 64 MiB, 2 ranks): a cap of
// 16 buffers made it allocate, zero and fault in 48 MiB of fresh receive buffers every round.
void Ucx::recycle(std::vector<float>&& buffer) {
    const std::size_t bytes = std::max<std::size_t>(1, buffer.size() * sizeof(float));
    const std::size_t cap = std::clamp<std::size_t>((256u << 20) / bytes, 1, 1024);
    auto& slot = pool_[buffer.size()];
    if (slot.size() < cap) slot.push_back(std::move(buffer));
}

// Delivers each sender's messages in the order they were sent, up to the first whose
// rendezvous data is still on its way.
std::size_t Ucx::deliver() {
    if (ready_ == 0 || !on_receive_) return 0;
    std::size_t n = 0;
    for (auto& p : peers_) {
        while (!p.inbox.empty() && p.inbox.front().ready) {
            Slot s = std::move(p.inbox.front());
            p.inbox.pop_front();
            --ready_;
            if (s.dropped) continue;
            ++n;
            on_receive_(std::move(s.msg));
        }
    }
    return n;
}

bool Ucx::progress() {
    assert(std::this_thread::get_id() == owner_);
    // A bounded number of worker passes, then deliveries: draining the worker while a sender
    // keeps the pipe full would hold every delivery (and every recycled buffer) back until the
    // stream pauses.
    bool any = false;
    for (int i = 0; i < 4 && ucp_worker_progress(worker_) != 0; ++i) any = true;
    if (errors_pending_) {
        errors_pending_ = false;
        any = true;
        for (int r = 0; r < size(); ++r) {
            auto& p = peers_[static_cast<std::size_t>(r)];
            if (p.error == UCS_OK) continue;
            const auto e = p.error;
            p.error = UCS_OK;
            if (!peer_failed(r))
                fail(failure(Errc::peer_failed, r, broken(r, e, "its endpoint broke")));
            close_ep(r);
        }
    }
    for (std::size_t i = 0; i < closing_.size();) {
        if (ucp_request_check_status(closing_[i]) != UCS_INPROGRESS) {
            ucp_request_free(closing_[i]);
            closing_[i] = closing_.back();
            closing_.pop_back();
        } else {
            ++i;
        }
    }
    // Reading the clock cost more than the rest of a poll while a send was pending (a third of
    // a spinning all-reduce's time here, KVM): send deadlines are checked every 16th call,
    // microseconds apart when spinning; a blocking wait() checks them after every poll.
    if (next_deadline_ != Clock::time_point::max() && (++progress_calls_ & 15u) == 0)
        check_timeouts(Clock::now());
    any |= deliver() > 0;
    any |= run_deferred() > 0;
    return any;
}

void Ucx::wait(Duration max) {
    if (progress()) return;
    if (!blocking_) {  // reading the clock costs more than a poll: read it every 64 polls
        Clock::time_point end{};
        for (unsigned i = 1;; ++i) {
            if (progress() || woken_.exchange(false)) return;
            if (i % 64 == 0) {
                const auto now = Clock::now();
                if (i == 64) end = now + max;
                if (now >= end) return;
            }
        }
    }
    const auto end = Clock::now() + max;
    const auto st = ucp_worker_arm(worker_);
    if (st == UCS_OK) {
        auto until = std::min(end, next_deadline_);
        auto ms = std::chrono::ceil<Duration>(until - Clock::now()).count();
        pollfd pfd{efd_, POLLIN, 0};
        if (!woken_.load()) ::poll(&pfd, 1, static_cast<int>(std::max<long>(0, ms)));
    } else if (st != UCS_ERR_BUSY) {
        log::warn("transport ucx: rank {}: ucp_worker_arm failed: {}", rank(), ucs(st));
    }
    woken_.store(false);
    if (next_deadline_ != Clock::time_point::max()) check_timeouts(Clock::now());
    progress();
}

}  // namespace gossamer::transport::ucx_detail
