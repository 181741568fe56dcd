// What only the UCX backend has: address blobs, connecting, the progress mode.
#include <doctest/doctest.h>

#include <set>
#include <thread>

#include "backends.hpp"
#include "gossamer/core/error.hpp"

using namespace transport_test;

namespace {

std::unique_ptr<tr::UcxTransport> make(int rank, int n,
                                       tr::ProgressMode mode = tr::ProgressMode::spin,
                                       tr::Duration timeout = 5000ms) {
    tr::UcxOptions o;
    static_cast<tr::TransportOptions&>(o) = options(rank, n, timeout);
    o.mode = mode;
    return tr::make_ucx_transport(o);
}

std::string connect_error(tr::UcxTransport& t, int peer, std::vector<std::byte> blob) {
    try {
        t.connect({{peer, std::move(blob)}});
    } catch (const gossamer::TransportError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("ucx: a malformed, truncated or misrouted address blob is refused naming the peer") {
    auto a = make(0, 3);
    auto b = make(1, 3);
    auto good = b->address();
    CHECK(connect_error(*a, 1, {}).find("cannot connect to peer 1: malformed address blob") !=
          std::string::npos);
    auto truncated = good;
    truncated.resize(good.size() - 3);
    CHECK(connect_error(*a, 1, truncated).find("peer 1: truncated address blob") !=
          std::string::npos);
    auto corrupted = good;
    corrupted.back() ^= std::byte{0xff};
    CHECK(connect_error(*a, 1, corrupted).find("peer 1: corrupted address blob") !=
          std::string::npos);
    CHECK(connect_error(*a, 2, good).find("peer 2: the address blob is rank 1's") !=
          std::string::npos);
    tr::UcxOptions other;
    static_cast<tr::TransportOptions&>(other) = options(1, 3);
    other.job_id = kJob + 1;
    auto c = tr::make_ucx_transport(other);
    CHECK(connect_error(*a, 1, c->address()).find("from job") != std::string::npos);
    CHECK(connect_error(*a, 1, good).empty());
}

TEST_CASE("ucx: an unreachable peer fails its sends within the timeout, naming it") {
    const auto timeout = 300ms;
    auto a = make(0, 2, tr::ProgressMode::spin, timeout);
    auto blob = make(1, 2)->address();  // that worker is gone as soon as it gave its address
    std::string error;
    try {
        a->connect({{1, blob}});
    } catch (const gossamer::TransportError& e) {
        error = e.what();  // UCX may already know the address leads nowhere
    }
    if (error.empty()) {
        std::vector<float> payload((1u << 20) / sizeof(float));
        Completions c;
        a->send(header(1, 0, payload.size()), bytes_of(payload), c.make(0));
        const auto t0 = tr::Clock::now();
        REQUIRE(tr::progress_until(
            *a, [&] { return c.all_done(); }, timeout * 5));
        CHECK(tr::Clock::now() - t0 < timeout * 2);
        CHECK(!c.status[0].ok());
        error = c.status[0].reason;
    }
    CAPTURE(error);
    CHECK(error.find("peer 1") != std::string::npos);
}

TEST_CASE("ucx: automatic progress blocks when local peers outnumber the cores") {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    tr::UcxOptions o;
    static_cast<tr::TransportOptions&>(o) = options(0, cores + 1);
    CHECK(tr::make_ucx_transport(o)->blocking());
    o.local_peers = 1;
    CHECK_FALSE(tr::make_ucx_transport(o)->blocking());
    o.mode = tr::ProgressMode::block;
    CHECK(tr::make_ucx_transport(o)->blocking());
}

// A pipelined all-reduce has 2 x chunks messages of one length in flight per round (64 at
// 64 MiB between 2 ranks): every buffer handed back must be reused, none allocated afresh (a cap
// of 16 per length made each such round fault in 48 MiB of new buffers).
TEST_CASE("ucx: 64 recycled receive buffers of one length all serve the next 64 receives") {
    auto peers = UcxShm::make(2);
    std::vector<tr::Message> got;
    peers[1]->on_receive([&](tr::Message&& m) { got.push_back(std::move(m)); });
    const int count = 64;
    const std::size_t floats = 64 * 1024;  // 256 KiB: rendezvous over shared memory
    std::set<const float*> pooled;
    for (int i = 0; i < count; ++i) {
        std::vector<float> b(floats);
        pooled.insert(b.data());
        peers[1]->recycle(std::move(b));
    }
    const std::vector<float> payload(floats, 2.5f);
    Completions c;
    for (int i = 0; i < count; ++i)
        peers[0]->send(header(1, static_cast<std::uint64_t>(i), floats), bytes_of(payload),
                       c.make(static_cast<std::uint64_t>(i)));
    REQUIRE(pump(peers, [&] { return c.all_done() && got.size() == count; }));
    int reused = 0;
    for (const auto& m : got) {
        reused += pooled.count(m.payload.data()) > 0 ? 1 : 0;
        CHECK(m.payload == payload);
    }
    CHECK(reused == count);
}

// A peer restarted after a crash joins again with a new worker (docs/bootstrap.md, "Joining a
// running job"): the survivor replaces its endpoint and forgets the failure.
TEST_CASE("ucx: a failed peer readmitted with a new address sends and receives again") {
    auto a = make(0, 2);
    auto b = make(1, 2);
    a->connect({{1, b->address()}});
    b->connect({{0, a->address()}});
    a->fail_peer(1, "peer 1: vanished (the bootstrap said so)");
    a->progress();
    REQUIRE(a->peer_failed(1));
    b.reset();  // the crashed process

    auto b2 = make(1, 2);
    a->readmit(1, b2->address());
    b2->connect({{0, a->address()}});
    CHECK_FALSE(a->peer_failed(1));
    std::vector<tr::Message> at_a, at_b;
    a->on_receive([&](tr::Message&& m) { at_a.push_back(std::move(m)); });
    b2->on_receive([&](tr::Message&& m) { at_b.push_back(std::move(m)); });
    const std::vector<float> payload(100, 1.5f);
    Completions c;
    a->send(header(1, 1, payload.size()), bytes_of(payload), c.make(1));
    b2->send(header(0, 2, payload.size()), bytes_of(payload), c.make(2));
    const auto end = tr::Clock::now() + 10s;
    while (!(c.all_done() && at_a.size() == 1 && at_b.size() == 1) && tr::Clock::now() < end) {
        a->progress();
        b2->progress();
    }
    REQUIRE(c.all_done());
    CHECK(c.status[1].ok());
    CHECK(c.status[2].ok());
    REQUIRE(at_a.size() == 1);
    REQUIRE(at_b.size() == 1);
    CHECK(at_a[0].payload == payload);
    CHECK(a->drops()[tr::DropReason::not_member] == 0);
    // A blob that is not the peer's is refused, and the peer stays as it was.
    CHECK_THROWS_AS(a->readmit(1, a->address()), gossamer::TransportError);
}
