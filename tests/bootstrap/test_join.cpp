// Joining a running job (docs/modules/bootstrap.md, "Joining a running job"): a peer restarted
// after a crash, or started late, enters through the coordinator; the view grows once a majority of
// the previous view acknowledged it, and every member learns the joiner's new blob.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

#include "cluster.hpp"
#include "gossamer/bootstrap/launcher.hpp"

using namespace gossamer::test;

namespace {

bool has_view(const bs::Bootstrap& peer, const std::vector<int>& members) {
    return peer.agreed_view().members == members;
}

bs::Blob other_blob(int rank) {
    bs::Blob b = blob_of(rank);
    for (char c : std::string("-restarted")) b.push_back(static_cast<std::byte>(c));
    return b;
}

// Crashes `rank` and waits until the others installed a view without it.
void crash_and_remove(std::vector<std::unique_ptr<bs::Bootstrap>>& peers, int rank,
                      const std::vector<int>& rest) {
    peers[static_cast<std::size_t>(rank)]->inject_fault(bs::Fault::crash);
    peers[static_cast<std::size_t>(rank)].reset();
    wait_until(
        [&] {
            for (int r : rest)
                if (!has_view(*peers[static_cast<std::size_t>(r)], rest)) return false;
            return true;
        },
        5s);
    for (int r : rest) REQUIRE(has_view(*peers[static_cast<std::size_t>(r)], rest));
}

}  // namespace

TEST_SUITE("bootstrap") {
    TEST_CASE(
        "join: a crashed peer restarted with join() is admitted, the view grows and every "
        "member gets its new blob") {
        auto eps = free_endpoints(4);
        std::vector<std::unique_ptr<bs::Bootstrap>> peers;
        for (int r = 0; r < 4; ++r)
            peers.push_back(std::make_unique<bs::Bootstrap>(quick_options(r, eps)));
        for (const auto& o : rendezvous_all(peers)) REQUIRE_MESSAGE(!o.failed, o.error);
        std::mutex mu;
        std::vector<std::pair<int, bs::Blob>> seen;  // (observer, rank) joins with blobs
        for (int r : {0, 1, 2})
            peers[static_cast<std::size_t>(r)]->on_peer_joined([&, r](int rank, const bs::Blob& b) {
                std::lock_guard lock(mu);
                if (b == other_blob(rank)) seen.emplace_back(r, b);
            });
        crash_and_remove(peers, 3, {0, 1, 2});

        peers[3] = std::make_unique<bs::Bootstrap>(quick_options(3, eps));
        const auto table = peers[3]->join(other_blob(3));
        REQUIRE(table.size() == 4);
        for (int r = 0; r < 3; ++r) CHECK(table[static_cast<std::size_t>(r)] == blob_of(r));
        CHECK(table[3] == other_blob(3));
        wait_until(
            [&] {
                std::lock_guard lock(mu);
                return seen.size() == 3;
            },
            3s);
        {
            std::lock_guard lock(mu);
            CHECK(seen.size() == 3);
        }
        for (int r = 0; r < 4; ++r) {
            CAPTURE(r);
            CHECK(has_view(*peers[static_cast<std::size_t>(r)], {0, 1, 2, 3}));
        }
        CHECK(peers[1]->joined_peers() == std::vector<int>{3});
        CHECK(peers[3]->lost_peers().empty());
        // It is a member like the others: its loss is seen and relayed again.
        peers[3]->inject_fault(bs::Fault::crash);
        wait_until([&] { return has_view(*peers[2], {0, 1, 2}); }, 5s);
        CHECK(has_view(*peers[2], {0, 1, 2}));
    }

    TEST_CASE(
        "join: with rank 0 gone the joiner finds the new coordinator, and ranks outside "
        "the view count as lost for it") {
        auto eps = free_endpoints(4);
        std::vector<std::unique_ptr<bs::Bootstrap>> peers;
        for (int r = 0; r < 4; ++r)
            peers.push_back(std::make_unique<bs::Bootstrap>(quick_options(r, eps)));
        for (const auto& o : rendezvous_all(peers)) REQUIRE_MESSAGE(!o.failed, o.error);
        crash_and_remove(peers, 0, {1, 2, 3});
        crash_and_remove(peers, 3, {1, 2});
        peers[3] = std::make_unique<bs::Bootstrap>(quick_options(3, eps));
        const auto table = peers[3]->join(other_blob(3));
        CHECK(table.size() == 4);
        wait_until([&] { return has_view(*peers[2], {1, 2, 3}); }, 3s);
        for (int r : {1, 2, 3}) {
            CAPTURE(r);
            CHECK(has_view(*peers[static_cast<std::size_t>(r)], {1, 2, 3}));
        }
        const auto lost = peers[3]->lost_peers();
        REQUIRE(lost.size() == 1);
        CHECK(lost[0].rank == 0);
        CHECK_MESSAGE(has(lost[0].reason, "lost before this peer joined"), lost[0].reason);
    }

    TEST_CASE(
        "join: rank 0 and its successor both crash and rejoin - no member judges a rejoined "
        "rank by a connection to its earlier process and the role moves on at the next loss") {
        auto eps = free_endpoints(4);
        std::vector<std::unique_ptr<bs::Bootstrap>> peers;
        for (int r = 0; r < 4; ++r)
            peers.push_back(std::make_unique<bs::Bootstrap>(quick_options(r, eps)));
        for (const auto& o : rendezvous_all(peers)) REQUIRE_MESSAGE(!o.failed, o.error);
        crash_and_remove(peers, 0, {1, 2, 3});  // rank 1 coordinates; 2 and 3 follow it
        crash_and_remove(peers, 1, {2, 3});     // rank 2 coordinates
        peers[1] = std::make_unique<bs::Bootstrap>(quick_options(1, eps));
        CHECK(peers[1]->join(other_blob(1)).size() == 4);
        wait_until([&] { return has_view(*peers[3], {1, 2, 3}); }, 3s);
        // Rank 3 followed rank 1 once: that connection is dead, and must not count against the
        // new rank 1 (it did, after one heartbeat timeout, before the fix).
        std::this_thread::sleep_for(3 * quick_options(0, eps).heartbeat_timeout);
        for (int r : {1, 2, 3}) {
            CAPTURE(r);
            const auto& p = *peers[static_cast<std::size_t>(r)];
            CHECK(has_view(p, {1, 2, 3}));
            for (const auto& l : p.lost_peers()) CHECK_MESSAGE(l.rank != 1, l.reason);
        }
        // Rank 0 comes back: a join may claim rank 0 (a hello may not), through rank 2.
        peers[0] = std::make_unique<bs::Bootstrap>(quick_options(0, eps));
        const auto table = peers[0]->join(other_blob(0));
        REQUIRE(table.size() == 4);
        CHECK(table[0] == other_blob(0));
        wait_until([&] { return has_view(*peers[3], {0, 1, 2, 3}); }, 3s);
        for (int r = 0; r < 4; ++r) {
            CAPTURE(r);
            CHECK(has_view(*peers[static_cast<std::size_t>(r)], {0, 1, 2, 3}));
        }
        CHECK(peers[0]->lost_peers().empty());
        // Rank 2 coordinates until it is lost; then rank 0, the lowest live rank, takes over and
        // the loss is agreed by all.
        crash_and_remove(peers, 2, {0, 1, 3});
        crash_and_remove(peers, 3, {0, 1});
    }

    TEST_CASE("join: a wrong token, a live rank and no running job are one line each") {
        auto eps = free_endpoints(3);
        std::vector<std::unique_ptr<bs::Bootstrap>> peers;
        for (int r = 0; r < 3; ++r)
            peers.push_back(std::make_unique<bs::Bootstrap>(quick_options(r, eps)));
        for (const auto& o : rendezvous_all(peers)) REQUIRE_MESSAGE(!o.failed, o.error);
        crash_and_remove(peers, 2, {0, 1});

        auto wrong = quick_options(2, eps);
        wrong.token = "not-the-secret";
        {
            bs::Bootstrap b(wrong);
            try {
                b.join(other_blob(2));
                FAIL("a wrong token was admitted");
            } catch (const bs::BootstrapError& e) {
                CHECK(e.reason() == bs::Reason::wrong_token);
                CHECK_MESSAGE(has(e.what(), "job token does not match"), e.what());
                CHECK(std::string(e.what()).find('\n') == std::string::npos);
                CHECK(std::string(e.what()).find("not-the-secret") == std::string::npos);
            }
        }
        CHECK(peers[0]->listener_stats().refused >= 1);
        CHECK(has_view(*peers[0], {0, 1}));

        // No running job: every peer of the topology gone.
        peers.clear();
        auto lonely = quick_options(2, eps);
        lonely.join_timeout = 500ms;
        bs::Bootstrap b(lonely);
        try {
            b.join(other_blob(2));
            FAIL("joined a job that is not running");
        } catch (const bs::BootstrapError& e) {
            CHECK(e.reason() == bs::Reason::unreachable);
            CHECK_MESSAGE(has(e.what(), "no running job to join"), e.what());
            CHECK(std::string(e.what()).find('\n') == std::string::npos);
        }
    }

    TEST_CASE("join: a rank that is still a member is refused as a duplicate") {
        // Two processes with one rank can listen at once only in a count-only job (kernel
        // ports): the second, joining, is refused while the first is alive.
        auto peers = start_peers(3, [](int r, std::vector<bs::Endpoint> eps) {
            return std::optional<bs::Options>(quick_options(
                r, bs::rendezvous_peers({"127.0.0.1", eps[0].port}, r, 3, "127.0.0.1")));
        });
        for (const auto& o : rendezvous_all(peers)) REQUIRE_MESSAGE(!o.failed, o.error);
        const int port = peers[0]->endpoint().port;
        bs::Bootstrap twin(
            quick_options(2, bs::rendezvous_peers({"127.0.0.1", port}, 2, 3, "127.0.0.1")));
        try {
            twin.join(other_blob(2));
            FAIL("a second rank 2 was admitted");
        } catch (const bs::BootstrapError& e) {
            CHECK(e.reason() == bs::Reason::duplicate_rank);
            CHECK_MESSAGE(has(e.what(), "rank 2 is still a member of the running job (view 0)"),
                          e.what());
        }
        CHECK(has_view(*peers[0], {0, 1, 2}));
        CHECK(peers[2]->lost_peers().empty());
    }

    TEST_CASE(
        "join: a job with min_peers starts without a rank that did not come, which joins "
        "later") {
        auto eps = free_endpoints(4);
        std::vector<std::unique_ptr<bs::Bootstrap>> peers;
        for (int r = 0; r < 3; ++r) {
            auto o = quick_options(r, eps);
            o.join_timeout = 1s;
            if (r == 0) o.min_peers = 3;
            peers.push_back(std::make_unique<bs::Bootstrap>(o));
        }
        peers.emplace_back();  // rank 3 is not started
        const auto outcomes = rendezvous_all(peers);
        for (int r = 0; r < 3; ++r)
            REQUIRE_MESSAGE(!outcomes[static_cast<std::size_t>(r)].failed,
                            outcomes[static_cast<std::size_t>(r)].error);
        for (int r = 0; r < 3; ++r) {
            CAPTURE(r);
            const auto& p = *peers[static_cast<std::size_t>(r)];
            CHECK(has_view(p, {0, 1, 2}));
            const auto lost = p.lost_peers();
            REQUIRE(lost.size() == 1);
            CHECK(lost[0].rank == 3);
            CHECK_FALSE(lost[0].left);
            CHECK_MESSAGE(has(lost[0].reason, "the job started without it"), lost[0].reason);
        }
        peers[3] = std::make_unique<bs::Bootstrap>(quick_options(3, eps));
        const auto table = peers[3]->join(other_blob(3));
        CHECK(table.size() == 4);
        wait_until([&] { return has_view(*peers[2], {0, 1, 2, 3}); }, 3s);
        for (int r = 0; r < 4; ++r) {
            CAPTURE(r);
            CHECK(has_view(*peers[static_cast<std::size_t>(r)], {0, 1, 2, 3}));
            CHECK(peers[static_cast<std::size_t>(r)]->lost_peers().empty());
        }
    }

    TEST_CASE(
        "join: rank 0 with min_peers and late ranks starts as soon as the others joined, "
        "without waiting for its join timeout") {
        auto eps = free_endpoints(4);
        std::vector<std::unique_ptr<bs::Bootstrap>> peers;
        for (int r = 0; r < 3; ++r) {
            auto o = quick_options(r, eps);
            o.join_timeout = 60s;  // the barrier must not wait for it
            if (r == 0) {
                o.min_peers = 3;
                o.late = {3};
            }
            peers.push_back(std::make_unique<bs::Bootstrap>(o));
        }
        peers.emplace_back();  // rank 3 joins later
        const auto begin = std::chrono::steady_clock::now();
        const auto outcomes = rendezvous_all(peers);
        const double took =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
        for (int r = 0; r < 3; ++r)
            REQUIRE_MESSAGE(!outcomes[static_cast<std::size_t>(r)].failed,
                            outcomes[static_cast<std::size_t>(r)].error);
        CHECK(took < 20);
        for (int r = 0; r < 3; ++r) CHECK(has_view(*peers[static_cast<std::size_t>(r)], {0, 1, 2}));
        peers[3] = std::make_unique<bs::Bootstrap>(quick_options(3, eps));
        CHECK(peers[3]->join(other_blob(3)).size() == 4);
        wait_until([&] { return has_view(*peers[2], {0, 1, 2, 3}); }, 3s);
        CHECK(has_view(*peers[2], {0, 1, 2, 3}));
    }

    TEST_CASE("join: a late rank out of range is one line") {
        auto o = quick_options(0, free_endpoints(2));
        o.min_peers = 1;
        o.late = {0};
        CHECK_THROWS_WITH_AS(bs::Bootstrap{o}, doctest::Contains("late: rank 0 cannot join late"),
                             gossamer::ConfigError);
        o.late = {2};
        CHECK_THROWS_WITH_AS(bs::Bootstrap{o}, doctest::Contains("late: rank 2 cannot join late"),
                             gossamer::ConfigError);
    }

    TEST_CASE("join: min_peers out of range is one line") {
        auto o = quick_options(0, free_endpoints(2));
        o.min_peers = 3;
        CHECK_THROWS_WITH_AS(bs::Bootstrap{o}, doctest::Contains("min_peers"),
                             gossamer::ConfigError);
    }
}
