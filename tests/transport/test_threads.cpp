// Peers as threads: each thread owns its transport and waits in wait() (the UCX backend on its
// worker's event fd), as the communication thread of a real peer does.
#include <doctest/doctest.h>

#include <atomic>

#include "backends.hpp"

using namespace transport_test;

TEST_CASE_TEMPLATE("peers on their own threads pass messages around a ring", B,
                   TRANSPORT_BACKENDS) {
    const int n = 4;
    const int rounds = 100;
    std::atomic<int> failures{0};
    B::threaded(n, [&](tr::Transport& t) {
        const int next = (t.rank() + 1) % n, prev = (t.rank() + n - 1) % n;
        int got = 0, completed = 0;
        std::uint64_t expect_seq = 0;
        t.on_receive([&](tr::Message&& m) {
            if (m.sender != prev || m.edge_seq != expect_seq++) failures++;
            got++;
            t.recycle(std::move(m.payload));
        });
        std::vector<float> payload(1024, static_cast<float>(t.rank()));
        for (int k = 0; k < rounds; ++k) {
            t.send(header(next, static_cast<std::uint64_t>(k), payload.size()), bytes_of(payload),
                   [&](const tr::Status& s) {
                       if (!s.ok()) failures++;
                       completed++;
                   });
            // Lock step: the buffer is reused only after its send completed.
            if (!tr::progress_until(
                    t, [&] { return completed == k + 1; }, 5000ms))
                failures++;
        }
        if (!tr::progress_until(
                t, [&] { return got == rounds; }, 5000ms))
            failures++;
    });
    CHECK(failures == 0);
}

TEST_CASE_TEMPLATE("wake() ends a wait early from another thread", B, TRANSPORT_BACKENDS) {
    B::threaded(2, [&](tr::Transport& t) {
        if (t.rank() != 0) return;
        std::jthread waker([&] {
            std::this_thread::sleep_for(50ms);
            t.wake();
        });
        const auto t0 = tr::Clock::now();
        t.wait(3000ms);
        CHECK(tr::Clock::now() - t0 < 2000ms);
    });
}
