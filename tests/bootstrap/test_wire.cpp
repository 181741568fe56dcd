// The frame codec, and handshakes that only a hand-made frame can produce.
#include <doctest/doctest.h>

#include "cluster.hpp"
// (cluster.hpp first: it includes <utility> before Boost.Asio)
#include <fmt/format.h>

#include "wire.hpp"

using namespace gossamer::test;
namespace asio = boost::asio;
namespace wire = gossamer::bootstrap::wire;

namespace {

wire::Hello hello_for(int rank, const std::vector<bs::Endpoint>& eps) {
    auto o = quick_options(rank, eps);
    return {static_cast<std::uint32_t>(rank),
            static_cast<std::uint32_t>(eps.size()),
            o.job_id,
            wire::peers_fingerprint(eps),
            o.model_size,
            o.layout.fingerprint(),
            o.token,
            o.layout.describe(),
            blob_of(rank),
            o.settings,
            eps[static_cast<std::size_t>(rank)]};
}

/// A hand-made peer: one connection, whole frames.
class RawPeer {
  public:
    explicit RawPeer(const bs::Endpoint& where) : socket_(io_) {
        socket_.connect(
            {asio::ip::make_address(where.host), static_cast<unsigned short>(where.port)});
    }
    void send(const wire::Bytes& frame) { asio::write(socket_, asio::buffer(frame)); }
    std::pair<wire::Kind, wire::Bytes> receive() {
        std::array<std::uint8_t, wire::kHeaderBytes> head{};
        asio::read(socket_, asio::buffer(head));
        auto h = wire::decode_header(head);
        wire::Bytes body(h.length);
        asio::read(socket_, asio::buffer(body));
        return {h.kind, body};
    }

  private:
    asio::io_context io_;
    asio::ip::tcp::socket socket_;
};

/// Sends one frame to `where` and returns the notice of the refusal that comes back.
wire::Notice refusal_for(const bs::Endpoint& where, const wire::Bytes& frame) {
    RawPeer peer(where);
    peer.send(frame);
    auto [kind, body] = peer.receive();
    REQUIRE(kind == wire::Kind::refuse);
    return wire::decode_notice(body);
}

}  // namespace

TEST_SUITE("bootstrap") {
    TEST_CASE("frames round-trip and refuse truncated or oversized contents") {
        auto eps = free_endpoints(2);
        auto hello = hello_for(1, eps);
        auto body = wire::encode(hello);
        auto back = wire::decode_hello(body);
        CHECK(back.rank == 1);
        CHECK(back.token == "secret");
        CHECK(back.layout_text == "fc1 [0, 100), fc2 [100, 130)");
        CHECK(back.address == blob_of(1));
        CHECK(back.settings.empty());
        hello.settings = {{"topology graph", 0x1234, "ring (n = 4)", "a fix stays home"},
                          {"epochs", 7, "3 epochs", ""}};
        body = wire::encode(hello);
        back = wire::decode_hello(body);
        REQUIRE(back.settings.size() == 2);
        CHECK(back.settings[0].field == "topology graph");
        CHECK(back.settings[0].digest == 0x1234);
        CHECK(back.settings[0].value == "ring (n = 4)");
        CHECK(back.settings[0].fix.empty());  // not on the wire
        CHECK(back.settings[1].value == "3 epochs");
        for (std::size_t cut : {std::size_t{0}, std::size_t{7}, body.size() - 1})
            CHECK_THROWS_AS(wire::decode_hello(std::span(body).first(cut)), wire::Malformed);
        body.push_back(0);
        CHECK_THROWS_WITH_AS(wire::decode_hello(body), "1 unexpected bytes after the body",
                             wire::Malformed);

        wire::Notice notice{13, {3, 5}, "rank 3 and rank 5 did not join"};
        auto n2 = wire::decode_notice(wire::encode(notice));
        CHECK(n2.code == 13);
        CHECK(n2.ranks == std::vector<std::uint32_t>{3, 5});
        CHECK(n2.text == notice.text);

        std::vector<bs::Blob> blobs{blob_of(0), {}, blob_of(2)};
        CHECK(wire::decode_table(wire::encode_table(blobs), 3) == blobs);
        CHECK_THROWS_AS(wire::decode_table(wire::encode_table(blobs), 4), wire::Malformed);

        const wire::ClockReading reading{3, -1'700'000'000'123'456};
        const auto r2 = wire::decode_clock(wire::encode(reading));
        CHECK(r2.seq == 3);
        CHECK(r2.unix_us == reading.unix_us);
        auto short_clock = wire::encode(reading);
        short_clock.pop_back();
        CHECK_THROWS_WITH_AS(wire::decode_clock(short_clock), "the body ends early",
                             wire::Malformed);
        CHECK(wire::decode_header(wire::frame(wire::Kind::clock_reply)).kind ==
              wire::Kind::clock_reply);

        auto f = wire::frame(wire::Kind::heartbeat);
        CHECK(f.size() == wire::kHeaderBytes);
        CHECK(wire::decode_header(f).kind == wire::Kind::heartbeat);
        f[6] = 99;
        CHECK_THROWS_WITH_AS(wire::decode_header(f), "unknown frame kind 99", wire::Malformed);
        f[0] = 'X';
        CHECK_THROWS_AS(wire::decode_header(f), wire::Malformed);
        // A token past its limit is refused before anything is allocated for it.
        hello.token.assign(wire::kMaxToken + 1, 't');
        CHECK_THROWS_AS(wire::decode_hello(wire::encode(hello)), wire::Malformed);
    }

    TEST_CASE("another protocol version is refused with both versions named") {
        auto eps = free_endpoints(2);
        bs::Bootstrap root(quick_options(0, eps));
        // A newer peer, the release before clock queries (version 4), and one of the releases
        // before the settings were compared (version 1).
        for (std::uint8_t v :
             {static_cast<std::uint8_t>(wire::kVersion + 1), std::uint8_t{4}, std::uint8_t{1}}) {
            auto frame = wire::frame(wire::Kind::hello, wire::encode(hello_for(1, eps)));
            frame[4] = v;
            auto notice = refusal_for(eps[0], frame);
            CHECK(notice.code == static_cast<std::uint32_t>(bs::Reason::version_mismatch));
            CHECK_MESSAGE(has(notice.text, fmt::format("the peer speaks bootstrap version {}, "
                                                       "rank 0 speaks version {}; run the same "
                                                       "Gossamer release on every node",
                                                       v, wire::kVersion)),
                          notice.text);
        }
        CHECK(root.listener_stats().refused == 3);
    }

    TEST_CASE("a second process with a joined rank and a join after the barrier are refused") {
        // Rank 3 comes last, so the impostor below cannot complete the barrier.
        auto eps = free_endpoints(4);
        std::vector<std::unique_ptr<bs::Bootstrap>> peers(4);
        peers[0] = std::make_unique<bs::Bootstrap>(quick_options(0, eps));
        peers[2] = std::make_unique<bs::Bootstrap>(quick_options(2, eps));
        std::vector<bs::Blob> t0, t2, t3;
        // A failed rendezvous leaves an empty table (and a failed check) instead of a terminate.
        auto join = [&](int r, std::vector<bs::Blob>& out) {
            return std::thread([&, r] {
                try {
                    out = peers[static_cast<std::size_t>(r)]->rendezvous(blob_of(r));
                } catch (const bs::BootstrapError&) {
                }
            });
        };
        auto j0 = join(0, t0);
        auto j2 = join(2, t2);
        {
            // A hand-made rank 1 joins first; the real rank 1 is then a second process.
            RawPeer impostor(eps[0]);
            impostor.send(wire::frame(wire::Kind::hello, wire::encode(hello_for(1, eps))));
            CHECK(impostor.receive().first == wire::Kind::welcome);
            bs::Bootstrap twin(quick_options(1, eps));
            try {
                twin.rendezvous(blob_of(1));
                FAIL("two processes with rank 1 both joined");
            } catch (const bs::BootstrapError& e) {
                CHECK(e.reason() == bs::Reason::duplicate_rank);
                CHECK_MESSAGE(has(e.what(), "rank 1 has already joined from 127.0.0.1:"), e.what());
                CHECK_MESSAGE(has(e.what(), "two processes were started with rank 1"), e.what());
            }
        }
        // The impostor hung up before the barrier, so rank 0 forgets it (give it a moment to
        // see the hang-up) and the real rank 1 can join.
        std::this_thread::sleep_for(300ms);
        peers[1] = std::make_unique<bs::Bootstrap>(quick_options(1, eps));
        peers[3] = std::make_unique<bs::Bootstrap>(quick_options(3, eps));
        auto j3 = join(3, t3);
        auto t1 = peers[1]->rendezvous(blob_of(1));
        j0.join();
        j2.join();
        j3.join();
        CHECK(t0.size() == 4);
        CHECK(t1 == t0);
        CHECK(t2 == t0);
        CHECK(t3 == t0);
        auto late =
            refusal_for(eps[0], wire::frame(wire::Kind::hello, wire::encode(hello_for(2, eps))));
        CHECK(late.code == static_cast<std::uint32_t>(bs::Reason::late_join));
        CHECK_MESSAGE(has(late.text, "rank 2 tried to join after the start-up barrier"), late.text);
        for (auto& p : peers) CHECK(p->lost_peers().empty());
    }
}
