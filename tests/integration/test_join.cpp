// peer::join: the bootstrap and the UCX transport joined into one peer, with the bootstrap's
// lost peers relayed to the transport on its communication thread (goodbyes are not failures).
#include <doctest/doctest.h>

#include "cluster.hpp"
// (cluster.hpp first: it includes <utility> before Boost.Asio)
#include <atomic>
#include <barrier>
#include <string>
#include <thread>
#include <vector>

#include "gossamer/peer/join.hpp"

using namespace gossamer::test;
namespace tp = gossamer::transport;
namespace gp = gossamer::peer;

namespace {

gp::JoinOptions join_options(int rank, const std::vector<bs::Endpoint>& endpoints) {
    gp::JoinOptions o;
    o.bootstrap = quick_options(rank, endpoints);
    o.ucx.mode = tp::ProgressMode::block;
    // No UCX error handling: only the bootstrap's relay can fail a peer in these tests.
    o.ucx.errors = tp::ErrorHandling::none;
    o.ucx.default_timeout = tp::Duration{10'000};
    return o;
}

}  // namespace

TEST_SUITE("integration") {
    TEST_CASE("join: the send timeout grows with the model (four messages at 8 Mbit/s)") {
        using gossamer::peer::send_timeout;
        // The demo's MLP: 23,554 parameters, 94 kB: about 10.4 s.
        CHECK(send_timeout(23'554).count() == 10'376);
        // The lab's wide MLP: 5,824,522 parameters, 23.3 MB: four of them at 1e6 bytes/s.
        CHECK(send_timeout(5'824'522).count() == 103'192);
        CHECK(send_timeout(0).count() == 10'000);
    }

    TEST_CASE("a vanished peer is failed in the others' transports and one that left is not") {
        constexpr int n = 3;
        const auto endpoints = free_endpoints(n);
        std::barrier sync(n);
        std::vector<std::string> errors(n);
        std::vector<bool> saw_crash(n, false), failed_leaver(n, false), saw_leave(n, false);
        std::vector<std::vector<int>> vanished(n);
        std::vector<std::thread> threads;
        for (int r = 0; r < n; ++r)
            threads.emplace_back([&, r] {
                std::unique_ptr<gp::JoinedPeer> me;
                try {
                    me = gp::join(join_options(r, endpoints));
                    CHECK(me->rank() == r);
                    CHECK(me->size() == n);
                    // Security: nothing longer than the model's largest message is received.
                    CHECK(me->transport().options().max_payload_bytes ==
                          tp::largest_payload_bytes(130));
                } catch (const std::exception& e) {
                    errors[r] = e.what();
                }
                sync.arrive_and_wait();
                if (!me) {
                    sync.arrive_and_drop();
                    return;
                }
                if (r == 2) {  // crashes: no goodbye
                    me->abandon();
                    sync.arrive_and_drop();
                    return;
                }
                auto& t = me->transport();
                saw_crash[r] = tp::progress_until(
                    t, [&] { return me->apply_peer_losses(), t.peer_failed(2); },
                    tp::Duration{3000});
                if (saw_crash[r])
                    CHECK_MESSAGE(has(t.peer_status(2).reason, "vanished"),
                                  t.peer_status(2).reason);
                sync.arrive_and_wait();
                if (r == 1) {  // leaves on purpose
                    me.reset();
                    return;
                }
                auto left = [&] {
                    for (const auto& l : me->losses())
                        if (l.rank == 1 && l.left) return true;
                    return false;
                };
                saw_leave[r] = tp::progress_until(
                    t, [&] { return me->apply_peer_losses(), left(); }, tp::Duration{3000});
                me->apply_peer_losses();
                failed_leaver[r] = t.peer_failed(1);
                vanished[r] = me->vanished();
            });
        for (auto& t : threads) t.join();
        for (int r = 0; r < n; ++r) CHECK_MESSAGE(errors[r].empty(), errors[r]);
        CHECK(saw_crash[0]);
        CHECK(saw_crash[1]);
        CHECK(saw_leave[0]);
        CHECK_FALSE(failed_leaver[0]);
        CHECK(vanished[0] == std::vector<int>{2});
    }

    TEST_CASE("a peer with the wrong job token is refused by join with one line") {
        const auto endpoints = free_endpoints(2);
        std::string refused;
        std::thread rank0([&] {
            auto o = join_options(0, endpoints);
            o.bootstrap.join_timeout = std::chrono::milliseconds(1500);
            CHECK_THROWS_AS(gp::join(o), bs::BootstrapError);  // rank 1 never joins rightly
        });
        try {
            auto o = join_options(1, endpoints);
            o.bootstrap.token = "not-the-secret";
            // Rank 0's refusal must come back: quick_options' 1 s for an answer is too short
            // under ctest -j 2 ("rank 0 did not answer within 1 s" failed CI once).
            o.bootstrap.io_timeout = std::chrono::milliseconds(5000);
            gp::join(o);
        } catch (const bs::BootstrapError& e) {
            refused = e.what();
            CHECK(e.reason() == bs::Reason::wrong_token);
        }
        rank0.join();
        CHECK_MESSAGE(has(refused, "job token does not match"), refused);
        CHECK(refused.find('\n') == std::string::npos);
    }
}
