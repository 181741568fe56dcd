#pragma once
// The backends the conformance suite runs against, and a round-robin pump that progresses N
// peers in one thread (UCC style: deterministic and cheap). Every wait has a time bound.

#include <doctest/doctest.h>

#include <barrier>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "gossamer/transport/inproc.hpp"
#include "gossamer/transport/transport.hpp"
#ifdef GOSSAMER_HAVE_UCX
#include "gossamer/transport/ucx.hpp"
#endif

namespace transport_test {

namespace tr = gossamer::transport;
using Peers = std::vector<std::unique_ptr<tr::Transport>>;
using namespace std::chrono_literals;

inline constexpr std::uint64_t kJob = 0x6a6f62;

inline constexpr std::uint64_t kNoLimit = tr::TransportOptions{}.max_payload_bytes;

inline tr::TransportOptions options(int rank, int n, tr::Duration timeout = 5000ms,
                                    std::uint64_t max_payload = kNoLimit) {
    tr::TransportOptions o;
    o.rank = rank;
    o.size = n;
    o.job_id = kJob;
    o.default_timeout = timeout;
    o.max_payload_bytes = max_payload;
    return o;
}

struct Inproc {
    static Peers make(int n, tr::Duration timeout = 5000ms, std::uint64_t max_payload = kNoLimit) {
        auto fabric = tr::make_inproc_fabric(n);
        Peers p;
        for (int r = 0; r < n; ++r)
            p.push_back(tr::make_inproc_transport(fabric, options(r, n, timeout, max_payload)));
        return p;
    }
    /// Runs body(transport) for n peers, each on its own thread, which creates its transport.
    static void threaded(int n, const std::function<void(tr::Transport&)>& body) {
        auto fabric = tr::make_inproc_fabric(n);
        std::barrier sync(n);  // all joined before anyone sends (the bootstrap's job for real)
        std::vector<std::jthread> threads;
        for (int r = 0; r < n; ++r)
            threads.emplace_back([&, r] {
                auto t = tr::make_inproc_transport(fabric, options(r, n));
                sync.arrive_and_wait();
                body(*t);
                sync.arrive_and_wait();
            });
    }
};

#ifdef GOSSAMER_HAVE_UCX
/// ErrorHandling::peer (the default: TCP between the peers, large payloads eager); UcxShm below
/// runs without UCX error handling (shared memory, rendezvous), UcxTcpRendezvous over TCP with
/// rendezvous forced.
template <tr::ErrorHandling kErrors, tr::LargeMessages kLarge = tr::LargeMessages::automatic>
struct UcxWith {
    static Peers make(int n, tr::Duration timeout = 5000ms, std::uint64_t max_payload = kNoLimit) {
        std::vector<std::unique_ptr<tr::UcxTransport>> u;
        std::map<int, std::vector<std::byte>> addresses;
        for (int r = 0; r < n; ++r) {
            tr::UcxOptions o;
            static_cast<tr::TransportOptions&>(o) = options(r, n, timeout, max_payload);
            o.mode = tr::ProgressMode::spin;
            o.errors = kErrors;
            o.large = kLarge;
            u.push_back(tr::make_ucx_transport(o));
            addresses[r] = u.back()->address();
        }
        for (auto& t : u) t->connect(addresses);
        Peers p;
        for (auto& t : u) p.push_back(std::move(t));
        return p;
    }
    /// As Inproc::threaded; the workers block on their event fds (more peers than cores here).
    static void threaded(int n, const std::function<void(tr::Transport&)>& body) {
        std::map<int, std::vector<std::byte>> addresses;
        std::mutex mu;
        std::barrier sync(n);
        std::vector<std::jthread> threads;
        for (int r = 0; r < n; ++r)
            threads.emplace_back([&, r] {
                tr::UcxOptions o;
                static_cast<tr::TransportOptions&>(o) = options(r, n);
                o.mode = tr::ProgressMode::block;
                o.errors = kErrors;
                o.large = kLarge;
                auto t = tr::make_ucx_transport(o);
                {
                    std::lock_guard lock(mu);
                    addresses[r] = t->address();
                }
                sync.arrive_and_wait();
                t->connect(addresses);
                body(*t);
                sync.arrive_and_wait();
            });
    }
};
using Ucx = UcxWith<tr::ErrorHandling::peer>;
using UcxShm = UcxWith<tr::ErrorHandling::none>;
using UcxTcpRendezvous = UcxWith<tr::ErrorHandling::peer, tr::LargeMessages::rendezvous>;
#endif

/// Progresses every live peer round-robin until pred() holds or `timeout` passes.
inline bool pump(Peers& peers, const std::function<bool()>& pred, tr::Duration timeout = 10'000ms) {
    const auto end = tr::Clock::now() + timeout;
    while (!pred()) {
        if (tr::Clock::now() > end) return pred();
        for (auto& t : peers)
            if (t) t->progress();
    }
    return true;
}

/// A header to `to` with recognisable fields.
inline tr::Message header(int to, std::uint64_t seq, std::uint64_t elements) {
    tr::Message m;
    m.kind = tr::MessageKind::mass_share;
    m.receiver = to;
    m.edge_seq = seq;
    m.round = static_cast<std::int64_t>(seq) * 3 - 7;
    m.partition = 2;
    m.chunk = static_cast<std::uint32_t>(seq % 5);
    m.offset = seq * 11;
    m.codec = 3;
    m.weight = 0.25 + static_cast<double>(seq);
    m.sent_at = 1.5e9 + static_cast<double>(seq);
    m.elements = elements;
    return m;
}

inline std::span<const std::byte> bytes_of(const std::vector<float>& v) {
    return std::as_bytes(std::span<const float>(v));
}

/// Counts every send callback by id, so a test can check each fired exactly once.
struct Completions {
    std::map<std::uint64_t, int> fired;
    std::map<std::uint64_t, tr::Status> status;
    std::uint64_t issued = 0;
    tr::SendCallback make(std::uint64_t id) {
        ++issued;
        fired[id];
        return [this, id](const tr::Status& s) {
            fired[id]++;
            status[id] = s;
        };
    }
    std::size_t done() const {
        std::size_t n = 0;
        for (auto& [id, c] : fired) n += c > 0;
        return n;
    }
    bool all_done() const { return done() == fired.size(); }
    bool exactly_once() const {
        for (auto& [id, c] : fired)
            if (c != 1) return false;
        return true;
    }
};

}  // namespace transport_test

#ifdef GOSSAMER_HAVE_UCX
#define TRANSPORT_BACKENDS                                               \
    transport_test::Inproc, transport_test::Ucx, transport_test::UcxShm, \
        transport_test::UcxTcpRendezvous
#else
#define TRANSPORT_BACKENDS transport_test::Inproc
#endif
TYPE_TO_STRING_AS("inproc", transport_test::Inproc);
#ifdef GOSSAMER_HAVE_UCX
TYPE_TO_STRING_AS("ucx", transport_test::Ucx);
TYPE_TO_STRING_AS("ucx-no-peer-errors", transport_test::UcxShm);
TYPE_TO_STRING_AS("ucx-tcp-rendezvous", transport_test::UcxTcpRendezvous);
#endif
