// The start-up: all peers exchange their address blobs, the barrier names missing ranks.
#include <doctest/doctest.h>

#include "cluster.hpp"

using namespace gossamer::test;

TEST_SUITE("bootstrap") {
    TEST_CASE("4 and 8 peers exchange their address blobs") {
        for (int n : {4, 8}) {
            CAPTURE(n);
            auto peers = start_peers(n);
            auto outcomes = rendezvous_all(peers);
            for (int r = 0; r < n; ++r) {
                CAPTURE(r);
                const auto& o = outcomes[static_cast<std::size_t>(r)];
                REQUIRE_MESSAGE(!o.failed, o.error);
                REQUIRE(o.table.size() == static_cast<std::size_t>(n));
                for (int j = 0; j < n; ++j)
                    CHECK(o.table[static_cast<std::size_t>(j)] == blob_of(j));
            }
            // Nobody is reported lost while everyone is alive for longer than the timeout.
            std::this_thread::sleep_for(1200ms);
            for (auto& p : peers) CHECK(p->lost_peers().empty());
        }
    }

    TEST_CASE("a single peer gets its own blob back") {
        auto peers = start_peers(1);
        auto table = peers[0]->rendezvous(blob_of(0));
        REQUIRE(table.size() == 1);
        CHECK(table[0] == blob_of(0));
    }

    TEST_CASE("peers started before rank 0 retry until it listens") {
        auto endpoints = free_endpoints(3);
        std::vector<std::unique_ptr<bs::Bootstrap>> peers(3);
        for (int r = 1; r < 3; ++r)
            peers[r] = std::make_unique<bs::Bootstrap>(quick_options(r, endpoints));
        std::thread late([&] {
            std::this_thread::sleep_for(400ms);
            peers[0] = std::make_unique<bs::Bootstrap>(quick_options(0, endpoints));
        });
        std::vector<Outcome> outcomes(3);
        std::vector<std::thread> joiners;
        for (int r = 1; r < 3; ++r)
            joiners.emplace_back([&, r] {
                try {
                    outcomes[r].table = peers[r]->rendezvous(blob_of(r));
                } catch (const bs::BootstrapError& e) {
                    outcomes[r] = {{}, true, e.reason(), e.ranks(), e.what()};
                }
            });
        late.join();
        outcomes[0].table = peers[0]->rendezvous(blob_of(0));
        for (auto& t : joiners) t.join();
        for (const auto& o : outcomes) {
            REQUIRE_MESSAGE(!o.failed, o.error);
            CHECK(o.table.size() == 3);
        }
    }

    TEST_CASE("the barrier timeout names the ranks that never arrived") {
        std::vector<bs::Endpoint> eps;
        auto peers =
            start_peers(6, [&](int r, std::vector<bs::Endpoint> e) -> std::optional<bs::Options> {
                eps = e;
                if (r == 3 || r == 5) return std::nullopt;
                auto o = quick_options(r, std::move(e));
                o.join_timeout = 1s;
                return o;
            });
        auto start = std::chrono::steady_clock::now();
        auto outcomes = rendezvous_all(peers);
        CHECK(std::chrono::steady_clock::now() - start < 3s);
        std::string expected = "rank 3 (" + eps[3].str() + ") and rank 5 (" + eps[5].str() +
                               ") did not join within 1 s; check that they were started with the "
                               "same topology file";
        for (int r : {0, 1, 2, 4}) {
            CAPTURE(r);
            const auto& o = outcomes[static_cast<std::size_t>(r)];
            REQUIRE(o.failed);
            CHECK(o.reason == bs::Reason::missing_peers);
            CHECK(o.ranks == std::vector<int>{3, 5});
            CHECK_MESSAGE(has(o.error, expected), o.error);
        }
    }

    TEST_CASE("an absent rank 0 is reported unreachable after the retries") {
        std::vector<bs::Endpoint> eps;
        auto peers =
            start_peers(2, [&](int r, std::vector<bs::Endpoint> e) -> std::optional<bs::Options> {
                eps = e;
                if (r == 0) return std::nullopt;
                auto o = quick_options(r, std::move(e));
                o.join_timeout = 1s;
                return o;
            });
        auto outcomes = rendezvous_all(peers);
        const auto& o = outcomes[1];
        REQUIRE(o.failed);
        CHECK(o.reason == bs::Reason::unreachable);
        CHECK_MESSAGE(has(o.error, "rank 1 (" + eps[1].str() + ") cannot reach rank 0 (" +
                                       eps[0].str() + ") after "),
                      o.error);
        CHECK_MESSAGE(has(o.error, "attempts within 1 s (last error: "), o.error);
    }
}
