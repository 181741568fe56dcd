// The bootstrap and the UCX backend together, as real peers start: each peer offers its UCX
// worker address to the rendezvous, connects to the addresses it gets back, and sends data.
#include <doctest/doctest.h>

#include "cluster.hpp"
// (cluster.hpp first: it includes <utility> before Boost.Asio)
#include <atomic>
#include <cstddef>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "gossamer/transport/ucx.hpp"

using namespace gossamer::test;
namespace tp = gossamer::transport;

TEST_CASE("4 peers exchange UCX addresses through the bootstrap and pass data around a ring") {
    constexpr int n = 4;
    constexpr std::size_t elements = 300'000;  // 1.2 MB: the rendezvous path
    const auto endpoints = free_endpoints(n);
    std::vector<std::string> errors(n);
    std::vector<int> got_from(n, -1);
    std::vector<bool> payload_ok(n, false), sent_ok(n, false);
    std::atomic<int> finished{0};
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r)
        threads.emplace_back([&, r] {
            try {
                tp::UcxOptions uo;
                uo.rank = r;
                uo.size = n;
                uo.job_id = 42;
                uo.mode = tp::ProgressMode::block;
                uo.default_timeout = tp::Duration{10'000};
                auto ucx = tp::make_ucx_transport(uo);
                bs::Bootstrap boot(quick_options(r, endpoints));
                const auto table = boot.rendezvous(ucx->address());
                std::map<int, std::vector<std::byte>> addresses;
                for (int j = 0; j < n; ++j) addresses[j] = table.at(static_cast<std::size_t>(j));
                ucx->connect(addresses);

                std::vector<float> data(elements);
                for (std::size_t k = 0; k < elements; ++k)
                    data[k] = static_cast<float>(r * 1000 + k % 997);
                bool received = false, done = false;
                ucx->on_receive([&](tp::Message&& m) {
                    got_from[r] = m.sender;
                    bool ok = m.payload.size() == elements;
                    for (std::size_t k = 0; ok && k < elements; ++k)
                        ok = m.payload[k] == static_cast<float>(m.sender * 1000 + k % 997);
                    payload_ok[r] = ok;
                    received = true;
                });
                tp::Message h;
                h.kind = tp::MessageKind::model_delta;
                h.receiver = (r + 1) % n;
                h.round = 7;
                h.elements = elements;
                ucx->send(h, std::as_bytes(std::span<const float>(data)), [&](const tp::Status& s) {
                    sent_ok[r] = s.ok();
                    done = true;
                });
                tp::progress_until(
                    *ucx, [&] { return received && done; }, tp::Duration{20'000});
                // Stay until every peer has its message, so no endpoint closes under a transfer.
                ++finished;
                tp::progress_until(
                    *ucx, [&] { return finished.load() == n; }, tp::Duration{20'000});
            } catch (const std::exception& e) {
                errors[r] = e.what();
            }
        });
    for (auto& t : threads) t.join();
    for (int r = 0; r < n; ++r) {
        CAPTURE(r);
        CHECK_MESSAGE(errors[r].empty(), errors[r]);
        CHECK(sent_ok[r]);
        CHECK(got_from[r] == (r + n - 1) % n);
        CHECK(payload_ok[r]);
    }
}
