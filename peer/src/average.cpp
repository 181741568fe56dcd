#include "gossamer/peer/average.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocol/ring.hpp"

namespace gossamer::peer {
namespace {

namespace ring = proto::ring;
using transport::Message;
using transport::MessageKind;
using transport::Status;

constexpr std::uint32_t kAckChunk = 0xffffffffu;

// The round every message of this average carries: negative, and a function of the survivor
// set (FNV-1a), so two peers with different views never mix their sums.
std::int64_t tag_of(std::span<const int> survivors) {
    std::uint64_t h = 1469598103934665603ull;
    for (int r : survivors) {
        h ^= static_cast<std::uint64_t>(r) + 1;
        h *= 1099511628211ull;
    }
    return -1 - static_cast<std::int64_t>(h >> 2);
}

std::string list(std::span<const int> ranks) {
    std::string s;
    for (int r : ranks) s += fmt::format("{}{}", s.empty() ? "" : ", ", r);
    return s;
}

struct State {
    std::map<std::uint32_t, Message> got;  // schedule step -> the chunk from the predecessor
    bool acked = false;                    // the successor has everything
    std::map<int, Status> failed;          // survivors that failed (or a send to one did)
    std::vector<Message> other;            // chunks for another survivor set: the caller's
    std::set<int> other_senders;
    int sends_open = 0;
    std::deque<std::vector<float>> buffers;  // payloads of sends in flight
};

}  // namespace

bool is_average_message(const Message& m) noexcept {
    return m.round < 0 && (m.kind == MessageKind::reduce || m.kind == MessageKind::control);
}

AverageResult exact_average(transport::Transport& t, std::span<const int> survivors,
                            std::span<const float> x, double mass, std::vector<Message>& pending,
                            const AverageOptions& options) {
    const int n = static_cast<int>(survivors.size());
    const auto me_it = std::find(survivors.begin(), survivors.end(), t.rank());
    if (me_it == survivors.end() || !(mass > 0))
        throw Error(
            fmt::format("exact average: rank {} is not among the survivors ({}) or has "
                        "no mass ({})",
                        t.rank(), list(survivors), mass));
    const int me = static_cast<int>(me_it - survivors.begin());
    const int succ = survivors[static_cast<std::size_t>((me + 1) % n)];
    const int pred = survivors[static_cast<std::size_t>((me + n - 1) % n)];
    const std::int64_t tag = tag_of(survivors);
    const std::size_t len = x.size() + 1;  // w·x, then w
    std::vector<float> acc(len);
    for (std::size_t k = 0; k < x.size(); ++k) acc[k] = static_cast<float>(mass * x[k]);
    acc[x.size()] = static_cast<float>(mass);

    auto st = std::make_shared<State>();
    auto take = [st, tag, pred, succ, &t](Message&& m) {
        if (!is_average_message(m)) return t.recycle(std::move(m.payload));
        if (m.round != tag) {  // a peer with another view (or a later attempt): keep it
            st->other_senders.insert(m.sender);
            st->other.push_back(std::move(m));
        } else if (m.kind == MessageKind::control && m.chunk == kAckChunk && m.sender == succ) {
            st->acked = true;
        } else if (m.kind == MessageKind::reduce && m.sender == pred) {
            st->got.emplace(m.chunk, std::move(m));
        }
    };
    {
        auto taken = std::move(pending);
        pending.clear();
        for (auto& m : taken) take(std::move(m));
    }
    t.on_receive(take);
    t.on_peer_failed([st](const Status& s) { st->failed.emplace(s.peer, s); });
    // However this ends, later messages go back to the transport, and the chunks for other
    // survivor sets to the caller (a retry over fewer peers may need them).
    struct Detach {
        transport::Transport& t;
        std::vector<Message>& pending;
        std::shared_ptr<State> st;
        ~Detach() {
            t.on_receive([&tr = t](Message&& m) { tr.recycle(std::move(m.payload)); });
            t.on_peer_failed([](const Status&) {});
            pending = std::move(st->other);
        }
    } detach{t, pending, st};
    for (int r : survivors)
        if (t.peer_failed(r)) st->failed.emplace(r, t.peer_status(r));

    auto send = [&](MessageKind kind, std::uint32_t chunk, ring::Range range) {
        Message h;
        h.kind = kind;
        h.receiver = kind == MessageKind::reduce ? succ : pred;
        h.round = tag;
        h.chunk = chunk;
        h.offset = range.begin;
        h.elements = range.size();
        auto& buf = st->buffers.emplace_back(acc.begin() + static_cast<std::ptrdiff_t>(range.begin),
                                             acc.begin() + static_cast<std::ptrdiff_t>(range.end));
        ++st->sends_open;
        t.send(h, std::as_bytes(std::span<const float>(buf)),
               [st, to = h.receiver](const Status& s) {
                   --st->sends_open;
                   if (!s.ok()) st->failed.emplace(to, s);
               });
    };

    const auto deadline = transport::Clock::now() + options.timeout;
    const int steps = ring::steps(n);
    // Waits for step k's chunk. Only two failures can spoil this peer's result: its predecessor
    // (whose chunks it still needs) and, while it has steps left to send, its successor. Others
    // that finish first and leave, or die after this peer's part is done, do not matter here.
    auto wait_for = [&](int k) {
        const auto key = static_cast<std::uint32_t>(k);
        while (!st->got.contains(key)) {
            if (options.poll) options.poll();
            t.progress();
            if (st->got.contains(key)) return true;
            if (options.vanished)
                for (int r : survivors)
                    if (r != t.rank() && options.vanished(r))
                        throw PeerFailure(r, fmt::format("it vanished during the exact average "
                                                         "on rank {} over ranks {}",
                                                         t.rank(), list(survivors)));
            for (int bad : {pred, succ}) {
                auto f = st->failed.find(bad);
                if (f != st->failed.end() && (bad == pred || k < steps - 1))
                    throw PeerFailure(bad,
                                      fmt::format("exact average on rank {} over ranks {} "
                                                  "stops ({})",
                                                  t.rank(), list(survivors), f->second.reason));
            }
            const auto now = transport::Clock::now();
            if (now >= deadline) return false;
            t.wait(std::min(std::chrono::duration_cast<transport::Duration>(deadline - now),
                            transport::Duration{200}));
        }
        return true;
    };

    for (int k = 0; k < steps; ++k) {
        const auto s = ring::step(me, n, k);
        send(MessageKind::reduce, static_cast<std::uint32_t>(k),
             ring::segment(len, n, s.send_segment));
        const auto key = static_cast<std::uint32_t>(k);
        if (!wait_for(k))
            throw Timeout(fmt::format(
                "exact average on rank {} over ranks {}: no step {} of {} from rank {} within "
                "{:.0f} s; {}",
                t.rank(), list(survivors), k + 1, steps, pred,
                std::chrono::duration<double>(options.timeout).count(),
                st->other_senders.empty()
                    ? std::string("it may still be training or be stuck")
                    : fmt::format("ranks {} sent chunks for another set of survivors (the peers "
                                  "saw different failures)",
                                  list(std::vector<int>(st->other_senders.begin(),
                                                        st->other_senders.end())))));
        Message m = std::move(st->got.at(key));
        st->got.erase(key);
        const auto range = ring::segment(len, n, s.recv_segment);
        if (m.offset != range.begin || m.payload.size() != range.size())
            throw Error(fmt::format(
                "exact average on rank {}: rank {} sent elements [{}, {}) "
                "for step {}, expected [{}, {}); the models differ in size",
                t.rank(), pred, m.offset, m.offset + m.payload.size(), k, range.begin, range.end));
        for (std::size_t j = 0; j < range.size(); ++j)
            acc[range.begin + j] = s.reduce ? acc[range.begin + j] + m.payload[j] : m.payload[j];
        t.recycle(std::move(m.payload));
    }
    AverageResult res;
    res.total_mass = acc[x.size()];
    res.model.resize(x.size());
    for (std::size_t k = 0; k < x.size(); ++k)
        res.model[k] = static_cast<float>(acc[k] / res.total_mass);
    if (n == 1) return res;
    // Tell the predecessor it may go; stay until the successor says the same (or is gone), so
    // no endpoint closes under a last chunk. Failures no longer matter: the result is here.
    send(MessageKind::control, kAckChunk, ring::Range{0, 0});
    const auto linger_end = std::min(deadline, transport::Clock::now() + options.linger);
    while (!(st->acked && st->sends_open == 0) && !st->failed.contains(succ) &&
           transport::Clock::now() < linger_end) {
        if (options.poll) options.poll();
        t.wait(transport::Duration{50});
    }
    return res;
}

}  // namespace gossamer::peer
