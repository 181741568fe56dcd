// Eager payloads in fragments (docs/modules/transport.md, "Eager in fragments"). UCX 1.13
// assembles a multi-fragment active message in a buffer it allocates for the whole message
// (ucp_am_long_first_handler) before the handler sees it, and the handler then copies it into the
// receiver's buffer: two copies of every byte on the receiver, besides the kernel's. Sent as
// fragments that each fit one UCT fragment, every piece reaches the handler in UCX's receive
// buffer and is copied once, straight to its place, as UCX's own rendezvous over active messages
// does; the message still goes at once, without a go-ahead from the receiver.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "gossamer/core/log.hpp"
#include "gossamer/transport/wire.hpp"
#include "ucx_impl.hpp"

namespace gossamer::transport::ucx_detail {
namespace {

void put_u64(std::byte* at, std::uint64_t v) {
    for (int i = 0; i < 8; ++i) at[i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
}
std::uint64_t get_u64(const std::byte* at) {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= std::uint64_t{std::to_integer<unsigned>(at[i])} << (8 * i);
    return v;
}

}  // namespace

ucs_status_t fragment_cb(void* arg, const void* header, std::size_t header_length, void* data,
                         std::size_t length, const ucp_am_recv_param_t* param) {
    return static_cast<Ucx*>(arg)->on_fragment(header, header_length, data, length, param);
}

// One SendOp per fragment, so that timeouts, failures and closing treat each like any send; the
// caller's callback runs once, when the last fragment completed, with the first failure if any.
void Ucx::send_fragments(const Message& header, std::span<const std::byte> payload,
                         SendCallback done, Duration timeout) {
    struct Group {
        SendCallback done;
        std::size_t left = 0;
        Status status;
    };
    const int to = header.receiver;
    const std::size_t parts = (payload.size() + kFragmentBytes - 1) / kFragmentBytes;
    auto group = std::make_shared<Group>(Group{std::move(done), parts, {}});
    std::uint64_t id = 0;
    if (to >= 0 && to < size()) id = peers_[static_cast<std::size_t>(to)].fragmented_sent++;
    Message h = header;
    h.sender = rank();
    std::array<std::byte, kHeaderBytes> wire{};
    encode_header(h, options_.job_id, wire);
    for (std::size_t i = 0; i < parts; ++i) {
        const std::size_t offset = i * kFragmentBytes;
        auto* op = new_op();
        std::copy(wire.begin(), wire.end(), op->header.begin());
        put_u64(op->header.data() + kHeaderBytes, id);
        put_u64(op->header.data() + kHeaderBytes + 8, offset);
        auto part = [group](const Status& s) {
            if (!s.ok() && group->status.ok()) group->status = s;
            if (--group->left == 0 && group->done) group->done(group->status);
        };
        start(op, to, op->header,
              payload.subspan(offset, std::min(kFragmentBytes, payload.size() - offset)),
              std::move(part), timeout, kFragmentAmId, i == 0);
    }
}

// The first fragment (offset 0: fragments of a message arrive in the order they were sent, as
// every active message of one endpoint does) passes the header checks and opens the message in
// its sender's delivery queue; the others are copied to their place. A fragment of no open
// message (its first was dropped, or its sender failed meanwhile) is discarded without a count:
// the message was counted once, at its first fragment.
ucs_status_t Ucx::on_fragment(const void* header, std::size_t header_length, void* data,
                              std::size_t length, const ucp_am_recv_param_t* param) {
    const auto* h = static_cast<const std::byte*>(header);
    if (header_length != kFragmentHeaderBytes || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
        drops_.add(DropReason::short_header);  // not a fragment this transport sends
        return UCS_OK;
    }
    const std::uint64_t id = get_u64(h + kHeaderBytes);
    const std::uint64_t offset = get_u64(h + kHeaderBytes + 8);
    if (offset == 0) {
        Message m;
        if (!admit({h, kHeaderBytes}, -1, -1, m)) return UCS_OK;
        if (peer_failed(m.sender)) {
            drops_.add(DropReason::not_member);
            return UCS_OK;
        }
        const std::uint64_t bytes = m.elements * sizeof(float);
        counters_.messages_received++;
        std::span<std::byte> place;
        if (place_) {
            place = place_(m);
            if (!place.empty() && place.size() != bytes) {
                log::warn(
                    "transport ucx: rank {}: a receive place of {} bytes for a payload of {}; "
                    "using a buffer of the transport's",
                    rank(), place.size(), bytes);
                place = {};
            }
            m.placed = !place.empty();
        }
        auto& p = peers_[static_cast<std::size_t>(m.sender)];
        auto slot = p.inbox.insert(p.inbox.end(), Slot{std::move(m)});
        std::byte* into = place.data();
        if (place.empty()) {
            slot->msg.payload = take_buffer(bytes / sizeof(float));
            into = reinterpret_cast<std::byte*>(slot->msg.payload.data());
        }
        p.assemblies.push_back(Assembly{id, slot, into, bytes, 0});
    }
    // The sender's rank, as the (checked) first fragment's header said.
    const int from = announced_sender({h, kHeaderBytes});
    if (from < 0 || from >= size() || peer_failed(from)) return UCS_OK;
    auto& list = peers_[static_cast<std::size_t>(from)].assemblies;
    auto a = std::find_if(list.begin(), list.end(), [&](const Assembly& x) { return x.id == id; });
    if (a == list.end()) return UCS_OK;
    if (offset > a->bytes || length > a->bytes - offset || a->arrived + length > a->bytes) {
        drops_.add(DropReason::bad_size);
        log::warn(
            "transport ucx: rank {}: peer {} sent a fragment of {} bytes at {} of a {}-byte "
            "message; the message is dropped",
            rank(), from, length, offset, a->bytes);
        a->slot->dropped = true;
        if (!a->slot->msg.placed) recycle(std::move(a->slot->msg.payload));
        a->arrived = a->bytes;
    } else {
        if (length) std::memcpy(a->into + offset, data, length);  // the one copy
        a->arrived += length;
        counters_.bytes_received += length;
    }
    if (a->arrived == a->bytes) {
        a->slot->ready = true;
        ++ready_;
        list.erase(a);
    }
    return UCS_OK;
}

void Ucx::drop_assemblies(int peer) {
    auto& p = peers_[static_cast<std::size_t>(peer)];
    for (auto& a : p.assemblies) {
        a.slot->dropped = true;
        a.slot->ready = true;
        ++ready_;
        if (!a.slot->msg.placed) recycle(std::move(a.slot->msg.payload));
    }
    p.assemblies.clear();
}

}  // namespace gossamer::transport::ucx_detail
