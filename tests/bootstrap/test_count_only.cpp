// Count-only jobs: peers know only rank 0's endpoint and listen where the kernel puts them; each
// reports its address in the hello and the table gives everyone everyone's.
#include <doctest/doctest.h>

#include "cluster.hpp"
#include "gossamer/bootstrap/launcher.hpp"
#include "support/errors.hpp"
#include "wire.hpp"

using namespace gossamer::test;

namespace {

/// Count-only options for rank r of n, rank 0 at 127.0.0.1:`port` (every peer binds `bind`).
bs::Options count_only_options(int rank, int n, int port, const std::string& bind) {
    auto list = bs::rendezvous_peers({"127.0.0.1", port}, rank, n, bind);
    return quick_options(rank, std::move(list));
}

/// Starts n count-only peers on a free rendezvous port (retrying when it was taken meanwhile).
std::vector<std::unique_ptr<bs::Bootstrap>> start_count_only(int n, const std::string& bind) {
    return start_peers(n, [&](int r, std::vector<bs::Endpoint> eps) {
        return std::optional<bs::Options>(count_only_options(r, n, eps[0].port, bind));
    });
}

}  // namespace

TEST_SUITE("bootstrap") {
    TEST_CASE(
        "count-only job with 5 peers on kernel ports learns every peer's address from the table") {
        for (const std::string bind : {"127.0.0.1", "0.0.0.0"}) {
            CAPTURE(bind);
            auto peers = start_count_only(5, bind);
            for (int r = 1; r < 5; ++r) CHECK(peers[r]->endpoint().port > 0);  // the kernel's
            auto outcomes = rendezvous_all(peers);
            std::vector<bs::Endpoint> truth;
            for (auto& p : peers) truth.push_back(p->endpoint());
            for (int r = 0; r < 5; ++r) {
                CAPTURE(r);
                const auto& o = outcomes[static_cast<std::size_t>(r)];
                REQUIRE_MESSAGE(!o.failed, o.error);
                for (int j = 0; j < 5; ++j) CHECK(o.table[j] == blob_of(j));
                const auto known = peers[r]->peers();
                REQUIRE(known.size() == 5);
                CHECK(known[0].port == truth[0].port);
                for (int j = 1; j < 5; ++j) {
                    CAPTURE(j);
                    // What rank j reported: its port, and a host it is reachable at (its bind
                    // address, or where it reached rank 0 from when it listens everywhere).
                    CHECK(known[j].port == truth[j].port);
                    CHECK(known[j].host == "127.0.0.1");
                }
            }
            std::this_thread::sleep_for(300ms);
            for (auto& p : peers) CHECK(p->lost_peers().empty());
        }
    }

    TEST_CASE("count-only rank 0 refuses a peer with a host list") {
        auto eps = free_endpoints(2);
        bs::Options odd = quick_options(1, eps);  // both ports known: a list job
        odd.join_timeout = 1s;
        std::vector<std::unique_ptr<bs::Bootstrap>> peers;
        peers.push_back(std::make_unique<bs::Bootstrap>([&] {
            auto o = count_only_options(0, 2, eps[0].port, "127.0.0.1");
            o.join_timeout = 1s;
            return o;
        }()));
        peers.push_back(std::make_unique<bs::Bootstrap>(odd));
        auto out = rendezvous_all(peers);
        REQUIRE(out[1].failed);
        CHECK(out[1].reason == bs::Reason::peer_list_mismatch);
        CHECK_MESSAGE(has(out[1].error, "peer lists of the topology differ"), out[1].error);
        CHECK_MESSAGE(has(out[1].error, "count-only"), out[1].error);
        REQUIRE(out[0].failed);
        CHECK(out[0].reason == bs::Reason::missing_peers);
        CHECK_MESSAGE(has(out[0].error, "rank 1's handshake was refused"), out[0].error);
    }

    TEST_CASE(
        "count-only job with a taken rendezvous port gives one line that says how to pick "
        "another") {
        auto eps = free_endpoints(1);
        boost::asio::io_context io;
        boost::asio::ip::tcp::acceptor squatter(io, {boost::asio::ip::make_address("127.0.0.1"),
                                                     static_cast<unsigned short>(eps[0].port)});
        try {
            bs::Bootstrap b(count_only_options(0, 3, eps[0].port, "127.0.0.1"));
            FAIL("rank 0 listened on a taken port");
        } catch (const bs::BootstrapError& e) {
            CHECK(e.reason() == bs::Reason::address_in_use);
            const std::string msg = e.what();
            CHECK_MESSAGE(has(msg, "rank 0 cannot listen on 127.0.0.1:" +
                                       std::to_string(eps[0].port) + ": address in use"),
                          msg);
            CHECK_MESSAGE(has(msg, "--rendezvous-port or GOSSAMER_RENDEZVOUS_PORT"), msg);
            CHECK(msg.find('\n') == std::string::npos);
        }
    }

    TEST_CASE("count-only job names a missing peer by rank without an address") {
        auto peers = start_peers(3, [](int r, std::vector<bs::Endpoint> eps) {
            if (r == 2) return std::optional<bs::Options>();
            auto o = count_only_options(r, 3, eps[0].port, "127.0.0.1");
            o.join_timeout = 1s;
            return std::optional<bs::Options>(o);
        });
        auto out = rendezvous_all(peers);
        REQUIRE(out[0].failed);
        CHECK(out[0].ranks == std::vector<int>{2});
        CHECK_MESSAGE(has(out[0].error, "rank 2 did not join within 1 s"), out[0].error);
    }

    TEST_CASE("count-only wire fields round-trip and bad ones are malformed") {
        namespace wire = bs::wire;
        wire::Hello h;
        h.rank = 2;
        h.n = 3;
        h.listen = {"10.0.0.3", 41234};
        auto back = wire::decode_hello(wire::encode(h));
        CHECK(back.listen.str() == "10.0.0.3:41234");
        h.listen.host.assign(256, 'h');  // past DNS's 255
        CHECK_THROWS_AS(wire::decode_hello(wire::encode(h)), wire::Malformed);

        std::vector<bs::Blob> blobs{blob_of(0), blob_of(1)};
        std::vector<bs::Endpoint> eps{{"0.0.0.0", 29450}, {"10.0.0.2", 5000}};
        auto t = wire::decode_full_table(wire::encode_table(blobs, eps), 2);
        CHECK(t.blobs == blobs);
        REQUIRE(t.endpoints.size() == 2);
        CHECK(t.endpoints[1].str() == "10.0.0.2:5000");
        auto body = wire::encode_table(blobs, eps);
        body[body.size() - 1] = 0x01;  // port 5000 + 2^24: past 65535
        CHECK_THROWS_WITH_AS(wire::decode_full_table(body, 2), "port 16782216 is out of range",
                             wire::Malformed);
        // A count-only list's fingerprint covers only its size.
        std::vector<bs::Endpoint> a{{"h", 1}, {"", 0}, {"", 0}}, b{{"x", 2}, {"y", 0}, {"", 0}};
        CHECK(wire::peers_fingerprint(a) == wire::peers_fingerprint(b));
        CHECK(wire::peers_fingerprint(a) == wire::count_only_fingerprint(3));
        CHECK(wire::peers_fingerprint(a) != wire::count_only_fingerprint(4));
    }

    TEST_CASE("count-only options without rank 0's port or with an overlong host are refused") {
        auto o = quick_options(1, {{"", 0}, {"127.0.0.1", 0}});
        auto msg = gossamer::test::config_error([&] { bs::Bootstrap b(o); });
        CHECK(msg ==
              "rendezvous: rank 0's port is not known, so no peer can join it; give rank 0's "
              "endpoint (the rendezvous) a port");
        o = quick_options(1, {{std::string(300, 'a'), 7}, {"127.0.0.1", 0}});
        msg = gossamer::test::config_error([&] { bs::Bootstrap b(o); });
        CHECK(has(msg, "is longer than 255 bytes"));
    }
}
