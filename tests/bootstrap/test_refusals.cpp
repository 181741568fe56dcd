// Bad input: each a clear line naming the peer and the reason, and a listener that keeps going.
#include <doctest/doctest.h>

#include <sstream>

#include "cluster.hpp"
#include "gossamer/core/log.hpp"
#include "support/stderr_capture.hpp"

using namespace gossamer::test;
namespace asio = boost::asio;

namespace {

/// Starts n peers where rank `odd` gets options changed by `change`; returns the outcomes.
/// With skip_odd, rank `odd` is not started at all.
template <typename F>
std::vector<Outcome> run_with_odd_one(int n, int odd, F change,
                                      std::vector<std::unique_ptr<bs::Bootstrap>>* keep = nullptr,
                                      bool skip_odd = false) {
    auto peers = start_peers(n, [&](int r, std::vector<bs::Endpoint> e) {
        auto o = quick_options(r, std::move(e));
        o.join_timeout = 1s;
        if (r == odd && skip_odd) return std::optional<bs::Options>();
        if (r == odd) change(o);
        return std::optional<bs::Options>(o);
    });
    auto out = rendezvous_all(peers);
    if (keep) *keep = std::move(peers);
    return out;
}

/// Sends `bytes` to `where` and waits until the other side closes (or 2 s pass).
void send_raw(const bs::Endpoint& where, const std::string& bytes) {
    asio::io_context io;
    asio::ip::tcp::socket s(io);
    s.connect({asio::ip::make_address(where.host), static_cast<unsigned short>(where.port)});
    // The listener may hang up before it has everything: errors here are expected.
    boost::system::error_code ec;
    asio::write(s, asio::buffer(bytes), ec);
    s.shutdown(asio::ip::tcp::socket::shutdown_send, ec);
    char sink[256];
    ec = {};
    while (!ec) s.read_some(asio::buffer(sink), ec);
}

}  // namespace

TEST_SUITE("bootstrap") {
    TEST_CASE("a wrong job token is refused on both sides and the right peer joins after it") {
        std::vector<std::unique_ptr<bs::Bootstrap>> peers;
        auto eps = free_endpoints(2);
        auto good = [&](int r) {
            auto o = quick_options(r, eps);
            o.join_timeout = 3s;
            return o;
        };
        auto root = std::make_unique<bs::Bootstrap>(good(0));
        std::vector<bs::Blob> root_table;
        std::thread root_thread([&] { root_table = root->rendezvous(blob_of(0)); });
        {
            auto bad = good(1);
            bad.token = "guess";
            bs::Bootstrap intruder(bad);
            try {
                intruder.rendezvous(blob_of(1));
                FAIL("a wrong token was accepted");
            } catch (const bs::BootstrapError& e) {
                CHECK(e.reason() == bs::Reason::wrong_token);
                std::string msg = e.what();
                CHECK_MESSAGE(has(msg, "rank 1 (" + eps[1].str() + ") was refused by rank 0 (" +
                                           eps[0].str() +
                                           "): rank 1's job token does not match "
                                           "rank 0's"),
                              msg);
                CHECK_FALSE(has(msg, "guess"));
                CHECK_FALSE(has(msg, "secret"));
            }
        }
        CHECK(root->listener_stats().refused == 1);
        bs::Bootstrap rightful(good(1));
        auto table = rightful.rendezvous(blob_of(1));
        root_thread.join();
        CHECK(table.size() == 2);
        CHECK(root_table == table);
    }

    TEST_CASE("mismatched partition layouts are refused with both layouts shown") {
        auto out = run_with_odd_one(2, 1, [](bs::Options& o) {
            o.layout = gossamer::PartitionLayout({{"fc1", 0, 120}, {"fc2", 120, 10}}, 130);
        });
        REQUIRE(out[1].failed);
        CHECK(out[1].reason == bs::Reason::layout_mismatch);
        CHECK_MESSAGE(has(out[1].error,
                          "partition layouts differ: rank 1 has 'fc1 [0, 120), fc2 "
                          "[120, 130)'"),
                      out[1].error);
        CHECK_MESSAGE(has(out[1].error, "rank 0 has 'fc1 [0, 100), fc2 [100, 130)'"), out[1].error);
        CHECK(out[0].reason == bs::Reason::missing_peers);  // rank 0 then waits in vain
    }

    TEST_CASE("mismatched model sizes are refused") {
        auto out = run_with_odd_one(3, 2, [](bs::Options& o) {
            o.model_size = 131;
            o.layout = gossamer::PartitionLayout::whole(131);
        });
        REQUIRE(out[2].failed);
        CHECK(out[2].reason == bs::Reason::model_size_mismatch);
        CHECK_MESSAGE(has(out[2].error,
                          "model sizes differ: rank 2 has 131 parameters, rank 0 has "
                          "130"),
                      out[2].error);
        CHECK(out[1].reason == bs::Reason::missing_peers);
        CHECK(out[1].ranks == std::vector<int>{2});
    }

    TEST_CASE("another job and another topology file are refused") {
        auto job = run_with_odd_one(2, 1, [](bs::Options& o) { o.job_id = 7; });
        CHECK(job[1].reason == bs::Reason::job_mismatch);
        CHECK_MESSAGE(has(job[1].error, "rank 1 is in job 7, rank 0 in job 42"), job[1].error);
        auto topo = run_with_odd_one(2, 1, [](bs::Options& o) { o.peers[0].host = "localhost"; });
        CHECK(topo[1].reason == bs::Reason::peer_list_mismatch);
        CHECK_MESSAGE(has(topo[1].error, "start every peer with the same topology file"),
                      topo[1].error);
    }

    TEST_CASE("rank 0's verdict on a refused peer names the field that differed") {
        auto token = run_with_odd_one(2, 1, [](bs::Options& o) { o.token = "guess"; });
        REQUIRE(token[0].failed);
        CHECK(token[0].reason == bs::Reason::missing_peers);
        CHECK(token[0].ranks == std::vector<int>{1});
        CHECK_MESSAGE(has(token[0].error, "handshake was refused"), token[0].error);
        CHECK_MESSAGE(has(token[0].error, "rank 1's job token does not match rank 0's"),
                      token[0].error);
        CHECK_MESSAGE(!has(token[0].error, "topology file"), token[0].error);
        CHECK_FALSE(has(token[0].error, "guess"));
        CHECK_FALSE(has(token[0].error, "secret"));

        auto model = run_with_odd_one(3, 2, [](bs::Options& o) {
            o.model_size = 131;
            o.layout = gossamer::PartitionLayout::whole(131);
        });
        REQUIRE(model[0].failed);
        CHECK_MESSAGE(has(model[0].error,
                          "model sizes differ: rank 2 has 131 parameters, rank 0 "
                          "has 130"),
                      model[0].error);
        CHECK_MESSAGE(!has(model[0].error, "topology file"), model[0].error);

        auto layout = run_with_odd_one(2, 1, [](bs::Options& o) {
            o.layout = gossamer::PartitionLayout({{"fc1", 0, 120}, {"fc2", 120, 10}}, 130);
        });
        REQUIRE(layout[0].failed);
        CHECK_MESSAGE(has(layout[0].error, "partition layouts differ"), layout[0].error);
        CHECK_MESSAGE(!has(layout[0].error, "topology file"), layout[0].error);

        auto job = run_with_odd_one(2, 1, [](bs::Options& o) { o.job_id = 7; });
        REQUIRE(job[0].failed);
        CHECK_MESSAGE(has(job[0].error, "job ids differ: rank 1 is in job 7, rank 0 in job 42"),
                      job[0].error);
        CHECK_MESSAGE(!has(job[0].error, "topology file"), job[0].error);
        CHECK_MESSAGE(has(job[1].error, "the same job id"), job[1].error);

        // A rank that never tried still points at how the peers were started.
        auto absent = run_with_odd_one(
            2, 1, [](bs::Options&) {}, nullptr, /*skip_odd=*/true);
        REQUIRE(absent[0].failed);
        CHECK_MESSAGE(has(absent[0].error, "did not join within 1 s; check that it was started"),
                      absent[0].error);
    }

    TEST_CASE("garbage on the port is refused and counted while the listener keeps working") {
        auto eps = free_endpoints(3);
        std::vector<std::unique_ptr<bs::Bootstrap>> peers;
        for (int r = 0; r < 3; ++r)
            peers.push_back(std::make_unique<bs::Bootstrap>(quick_options(r, eps)));
        send_raw(eps[0], "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        // Frames of the current version (6), so the bytes after the header are what is wrong.
        send_raw(eps[0], std::string("GSBT\x06\x00\x01\x00\xff\xff\xff\xff", 12));  // huge body
        send_raw(eps[0], std::string("GSBT\x06\x00\x01\x00\x04\x00\x00\x00"
                                     "abcd",
                                     16));           // short hello
        send_raw(eps[0], "GS");                      // ends early
        send_raw(eps[2], "\x16\x03\x01 TLS hello");  // not rank 0: counted there
        CHECK(peers[0]->listener_stats().malformed == 4);
        CHECK(peers[2]->listener_stats().malformed == 1);
        auto out = rendezvous_all(peers);
        for (const auto& o : out) {
            REQUIRE_MESSAGE(!o.failed, o.error);
            CHECK(o.table.size() == 3);
        }
        // ...and after the barrier, too.
        send_raw(eps[0], "more garbage, later");
        CHECK(peers[0]->listener_stats().malformed == 5);
        for (auto& p : peers) CHECK(p->lost_peers().empty());
    }

    TEST_CASE("200 rapid connections give a few warnings and a summary, not 200 lines") {
        auto eps = free_endpoints(1);
        auto o = quick_options(0, eps);
        o.warn_interval = 1s;
        const auto saved = gossamer::log::level();
        gossamer::log::set_level(gossamer::log::Level::info);
        std::string text;
        {
            StderrCapture capture;
            {
                bs::Bootstrap root(o);
                asio::io_context io;
                const asio::ip::tcp::endpoint where{asio::ip::make_address(eps[0].host),
                                                    static_cast<unsigned short>(eps[0].port)};
                for (int i = 0; i < 200; ++i) {  // connect and hang up at once: 200 bounded tries
                    asio::ip::tcp::socket s(io);
                    boost::system::error_code ec;
                    s.connect(where, ec);
                    s.close(ec);
                }
                wait_until([&] { return root.listener_stats().malformed == 200; }, 20s);
                CHECK(root.listener_stats().malformed == 200);
                std::this_thread::sleep_for(1200ms);  // a summary at the end of a window
            }
            text = capture.text();
        }
        gossamer::log::set_level(saved);
        CAPTURE(text);
        int lines = 0, shown = 0;
        std::uint64_t summed = 0;
        std::istringstream in(text);
        for (std::string line; std::getline(in, line);) {
            ++lines;
            if (has(line, "refused a connection from") && !has(line, "not shown")) ++shown;
            if (auto at = line.find(" more listener warning"); at != std::string::npos) {
                auto start = line.rfind(' ', at - 1);
                summed += std::stoull(line.substr(start + 1, at - start - 1));
            }
        }
        CHECK(shown == 3);
        CHECK(summed == 197);
        CHECK(lines <= 6);
    }

    TEST_CASE("a peer that sends nothing is dropped after the handshake timeout") {
        auto eps = free_endpoints(1);
        auto o = quick_options(0, eps);
        o.io_timeout = 300ms;
        bs::Bootstrap root(o);
        asio::io_context io;
        asio::ip::tcp::socket s(io);
        s.connect({asio::ip::make_address(eps[0].host), static_cast<unsigned short>(eps[0].port)});
        auto start = std::chrono::steady_clock::now();
        char sink[16];
        boost::system::error_code ec;
        s.read_some(asio::buffer(sink), ec);  // returns when rank 0 hangs up
        CHECK(ec);
        CHECK(std::chrono::steady_clock::now() - start < 2s);
        CHECK(root.listener_stats().malformed == 1);
    }

    TEST_CASE("a handshake sent to a rank other than 0 is refused") {
        auto eps = free_endpoints(3);
        bs::Bootstrap other(quick_options(1, {eps[0], eps[1]}));
        bs::Bootstrap lost(quick_options(1, {eps[1], eps[2]}));  // believes eps[1] is rank 0
        try {
            lost.rendezvous(blob_of(1));
            FAIL("a peer that is not rank 0 accepted a handshake");
        } catch (const bs::BootstrapError& e) {
            CHECK(e.reason() == bs::Reason::not_rendezvous);
            CHECK_MESSAGE(has(e.what(), "rank 1 (" + eps[1].str() +
                                            ") is not the rendezvous; "
                                            "peers join rank 0 (" +
                                            eps[0].str() + ")"),
                          e.what());
        }
        CHECK(other.listener_stats().refused == 1);
    }

    TEST_CASE("a rank 0 port that answers with something else is named") {
        auto eps = free_endpoints(2);
        asio::io_context io;
        asio::ip::tcp::acceptor impostor(
            io, {asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(eps[0].port)});
        std::thread server([&] {
            auto s = impostor.accept();
            boost::system::error_code ec;
            asio::write(s, asio::buffer(std::string("HTTP/1.1 400 Bad Request\r\n\r\n")), ec);
            char sink[4096];
            s.read_some(asio::buffer(sink), ec);
        });
        bs::Bootstrap joiner(quick_options(1, eps));
        try {
            joiner.rendezvous(blob_of(1));
            FAIL("a foreign server was taken for rank 0");
        } catch (const bs::BootstrapError& e) {
            CHECK(e.reason() == bs::Reason::malformed);
            CHECK_MESSAGE(has(e.what(), "rank 0 (" + eps[0].str() +
                                            ") answered with bytes that "
                                            "are not the bootstrap protocol"),
                          e.what());
        }
        server.join();
    }

    TEST_CASE("a port in use is named with its rank and a fix") {
        auto eps = free_endpoints(3);
        asio::io_context io;
        asio::ip::tcp::acceptor squatter(
            io, {asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(eps[2].port)});
        try {
            bs::Bootstrap b(quick_options(2, eps));
            FAIL("listening on a taken port succeeded");
        } catch (const bs::BootstrapError& e) {
            CHECK(e.reason() == bs::Reason::address_in_use);
            CHECK(std::string(e.what()) ==
                  "rank 2 cannot listen on " + eps[2].str() +
                      ": address in use; pick another port in the topology file or stop the "
                      "process using it");
        }
    }

    TEST_CASE("an address that is not this host's cannot be listened on") {
        auto eps = free_endpoints(2);
        eps[1].host = "192.0.2.1";  // TEST-NET-1: never a local address
        try {
            bs::Bootstrap b(quick_options(1, eps));
            FAIL("listening on a foreign address succeeded");
        } catch (const bs::BootstrapError& e) {
            CHECK(e.reason() == bs::Reason::cannot_listen);
            CHECK_MESSAGE(has(e.what(), "rank 1 cannot listen on 192.0.2.1:"), e.what());
        }
    }

    TEST_CASE("a rank outside the peer list is refused at construction") {
        auto eps = free_endpoints(2);
        CHECK_THROWS_AS(bs::Bootstrap(quick_options(2, eps)), bs::BootstrapError);
    }

    TEST_CASE("timeouts that cannot work are refused at construction") {
        auto eps = free_endpoints(1);
        auto o = quick_options(0, eps);
        o.heartbeat_timeout = 150ms;  // under two 100 ms intervals
        CHECK_THROWS_WITH_AS(bs::Bootstrap{o},
                             doctest::Contains("heartbeat_timeout: 150 ms is shorter than two "
                                               "heartbeat intervals (200 ms)"),
                             gossamer::ConfigError);
        o = quick_options(0, eps);
        o.join_timeout = 0ms;
        CHECK_THROWS_WITH_AS(bs::Bootstrap{o}, "join_timeout: must be positive, got 0 ms",
                             gossamer::ConfigError);
    }
}
