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

std::vector<float> pattern(std::size_t n, float seed) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = seed + static_cast<float>(i % 1000) * 0.25f;
    return v;
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

// A peer restarted after a crash joins again with a new worker (docs/modules/bootstrap.md, "Joining
// a running job"): the survivor replaces its endpoint and forgets the failure.
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

// -- eager or rendezvous for large payloads (docs/modules/transport.md, "Eager and rendezvous")
// -------

TEST_CASE("ucx: the transports are read from ucp_context_print_info's resource lines, once each") {
    const std::string info =
        "#     component 1  :  tcp\n"
        "#            md 1  :  component 1  tcp \n"
        "#      resource 0  :  md 0  dev 0  flags -- self/memory0\n"
        "#      resource 1  :  md 1  dev 1  flags -- tcp/lo\n"
        "#      resource 2  :  md 1  dev 2  flags -- tcp/eth0\n"
        "#      resource 3  :  md 3  dev 3  flags -- posix/memory\n"
        "#      resource 4  :  md 4  dev 4  flags -- rc_mlx5/mlx5_0:1\n";
    CHECK(tr::ucx_resource_names(info) ==
          std::vector<std::string>{"self", "tcp", "posix", "rc_mlx5"});
    CHECK(tr::ucx_resource_names("").empty());
    CHECK(tr::ucx_resource_names("#      resource 0  :  flags -- /x\nresource\n").empty());
}

TEST_CASE("ucx: large payloads go eager over TCP, by rendezvous over RDMA or shared memory") {
    using L = tr::LargeMessages;
    const std::vector<std::string> tcp{"self", "tcp", "sysv", "posix", "cma"};
    CHECK(tr::resolve_large_messages(L::automatic, tcp, false) == L::eager);
    CHECK(tr::resolve_large_messages(L::automatic, {"self", "tcp"}, true) == L::eager);
    CHECK(tr::resolve_large_messages(L::automatic, tcp, true) == L::rendezvous);
    CHECK(tr::resolve_large_messages(L::automatic, {"tcp", "rc_mlx5"}, false) == L::rendezvous);
    CHECK(tr::resolve_large_messages(L::automatic, {"tcp", "dc_mlx5"}, false) == L::rendezvous);
    CHECK(tr::resolve_large_messages(L::eager, {"rc_mlx5"}, true) == L::eager);
    CHECK(tr::resolve_large_messages(L::rendezvous, tcp, false) == L::rendezvous);
    CHECK(tr::parse_large_messages("eager") == L::eager);
    CHECK(tr::parse_large_messages("auto") == L::automatic);
    CHECK_FALSE(tr::parse_large_messages("Eager").has_value());
    CHECK(std::string(tr::to_string(L::rendezvous)) == "rendezvous");
}

TEST_CASE("ucx: a transport resolves how large payloads go and GOSSAMER_UCX_LARGE overrides it") {
    ::unsetenv("GOSSAMER_UCX_LARGE");
    tr::UcxOptions o;
    static_cast<tr::TransportOptions&>(o) = options(0, 2);
    o.large = tr::LargeMessages::eager;
    CHECK(tr::make_ucx_transport(o)->large_messages() == tr::LargeMessages::eager);
    o.large = tr::LargeMessages::rendezvous;
    CHECK(tr::make_ucx_transport(o)->large_messages() == tr::LargeMessages::rendezvous);
    // Both peers on this host without UCX error handling: shared memory, so rendezvous.
    o.large = tr::LargeMessages::automatic;
    o.errors = tr::ErrorHandling::none;
    CHECK(tr::make_ucx_transport(o)->large_messages() == tr::LargeMessages::rendezvous);
    o.errors = tr::ErrorHandling::peer;
    CHECK(tr::make_ucx_transport(o)->large_messages() != tr::LargeMessages::automatic);

    ::setenv("GOSSAMER_UCX_LARGE", "eager", 1);
    o.large = tr::LargeMessages::rendezvous;
    CHECK(tr::make_ucx_transport(o)->large_messages() == tr::LargeMessages::eager);
    ::setenv("GOSSAMER_UCX_LARGE", "fast", 1);
    std::string error;
    try {
        tr::make_ucx_transport(o);
    } catch (const gossamer::TransportError& e) {
        error = e.what();
    }
    ::unsetenv("GOSSAMER_UCX_LARGE");
    CHECK(error ==
          "ucx: rank 0: GOSSAMER_UCX_LARGE=fast: not a way to send large messages; use "
          "automatic, rendezvous or eager");
}

// The reason eager wins over TCP: a rendezvous send needs the receiver's go-ahead, which queues
// behind whatever the receiver itself is sending on that connection (a gossip peer sends its
// model while it receives its neighbour's). An eager one goes without it: here it completes
// while the receiver does not progress at all; the rendezvous one does not.
TEST_CASE(
    "ucx: an eager 1 MiB send over TCP completes without the receiver and a rendezvous one waits") {
    for (const auto large : {tr::LargeMessages::eager, tr::LargeMessages::rendezvous}) {
        CAPTURE(tr::to_string(large));
        std::vector<std::unique_ptr<tr::UcxTransport>> u;
        std::map<int, std::vector<std::byte>> addresses;
        for (int r = 0; r < 2; ++r) {
            tr::UcxOptions o;
            static_cast<tr::TransportOptions&>(o) = options(r, 2);
            o.mode = tr::ProgressMode::spin;
            o.large = large;
            u.push_back(tr::make_ucx_transport(o));
            addresses[r] = u.back()->address();
        }
        for (auto& t : u) t->connect(addresses);
        // A first small exchange: the connection is up before the receiver stops progressing.
        std::vector<tr::Message> got;
        u[1]->on_receive([&](tr::Message&& m) { got.push_back(std::move(m)); });
        const std::vector<float> tiny(4, 1.0f), big(256 * 1024, 2.0f);
        Completions c;
        u[0]->send(header(1, 0, tiny.size()), bytes_of(tiny), c.make(0));
        Peers both;
        both.push_back(std::move(u[0]));
        both.push_back(std::move(u[1]));
        REQUIRE(pump(both, [&] { return c.all_done() && got.size() == 1; }));
        both[0]->send(header(1, 1, big.size()), bytes_of(big), c.make(1));
        const auto end = tr::Clock::now() + 1000ms;
        while (tr::Clock::now() < end && !c.all_done()) both[0]->progress();
        CHECK(c.all_done() == (large == tr::LargeMessages::eager));
        REQUIRE(pump(both, [&] { return c.all_done() && got.size() == 2; }));
        CHECK(got[1].payload == big);
    }
}

// Eager payloads above 60 KiB travel as fragments (docs/modules/transport.md, "Eager in
// fragments"): each message arrives whole and in order among the small ones, into a pooled buffer
// or the receiver's place, and counts as one message.
TEST_CASE("ucx: eager payloads in fragments arrive whole, in order, placed or pooled, once each") {
    auto peers = UcxWith<tr::ErrorHandling::peer, tr::LargeMessages::eager>::make(2);
    auto* rx = static_cast<tr::UcxTransport*>(peers[1].get());
    REQUIRE(rx->large_messages() == tr::LargeMessages::eager);
    // floats: one fragment exactly, one float over it, a tail of 3 floats, 1 MiB + 12 B, 5 MiB.
    const std::vector<std::size_t> sizes{15360, 15361, 1, 262147, 3, 1310720, 15360 * 7 + 3};
    std::vector<std::vector<float>> payloads;
    for (std::size_t i = 0; i < sizes.size(); ++i)
        payloads.push_back(pattern(sizes[i], static_cast<float>(i) + 0.5f));
    std::vector<float> placed(sizes[5], 0.0f);  // the 5 MiB message lands here
    peers[1]->on_place([&](const tr::Message& m) {
        return m.edge_seq == 5 ? std::as_writable_bytes(std::span(placed)) : std::span<std::byte>{};
    });
    std::vector<tr::Message> got;
    peers[1]->on_receive([&](tr::Message&& m) { got.push_back(std::move(m)); });
    Completions c;
    for (int round = 0; round < 3; ++round)
        for (std::size_t i = 0; i < sizes.size(); ++i)
            peers[0]->send(header(1, i, sizes[i]), bytes_of(payloads[i]), c.make(round * 100 + i));
    const std::size_t total = 3 * sizes.size();
    REQUIRE(pump(peers, [&] { return c.all_done() && got.size() == total; }));
    CHECK(c.exactly_once());
    for (auto& [id, s] : c.status) CHECK(s.ok());
    for (std::size_t k = 0; k < total; ++k) {
        const std::size_t i = k % sizes.size();
        CAPTURE(k);
        CHECK(got[k].edge_seq == i);
        CHECK(got[k].elements == sizes[i]);
        CHECK(got[k].weight == 0.25 + static_cast<double>(i));
        if (i == 5) {
            CHECK(got[k].placed);
            CHECK(got[k].payload.empty());
        } else {
            CHECK_FALSE(got[k].placed);
            CHECK(got[k].payload == payloads[i]);
        }
    }
    CHECK(placed == payloads[5]);
    CHECK(peers[1]->counters().messages_received == total);
    CHECK(peers[0]->counters().messages_sent == total);
    std::uint64_t bytes = 0;
    for (auto s : sizes) bytes += 3 * s * sizeof(float);
    CHECK(peers[1]->counters().bytes_received == bytes);
    for (std::size_t r = 0; r < tr::kDropReasons; ++r)
        CHECK(peers[1]->drops()[static_cast<tr::DropReason>(r)] == 0);
}
