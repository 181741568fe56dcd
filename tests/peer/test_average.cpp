// peer::exact_average: the ring all-reduce of (w·x, w) among the survivors after training, as
// threads over the in-process transport.
#include <doctest/doctest.h>

#include <barrier>
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gossamer/core/error.hpp"
#include "gossamer/peer/average.hpp"
#include "gossamer/transport/inproc.hpp"

namespace {

using namespace gossamer;
namespace tp = gossamer::transport;

struct Outcome {
    std::optional<peer::AverageResult> result;
    std::string error;
    int failed_rank = -1;
};

// n peers; peer r holds x_r[k] = r + k / 10 with mass 1 + r; `survivors(r)` is the set rank r
// passes (empty: this rank takes no part and drops its transport at once).
std::vector<Outcome> run(int n, std::size_t size,
                         const std::function<std::vector<int>(int)>& survivors,
                         tp::Duration timeout = tp::Duration{5000}) {
    auto fabric = tp::make_inproc_fabric(n);
    std::barrier sync(n);
    std::vector<Outcome> out(static_cast<std::size_t>(n));
    std::vector<std::jthread> threads;
    for (int r = 0; r < n; ++r)
        threads.emplace_back([&, r] {
            tp::TransportOptions o;
            o.rank = r;
            o.size = n;
            o.default_timeout = tp::Duration{5000};
            auto t = tp::make_inproc_transport(fabric, o);
            sync.arrive_and_wait();
            const auto set = survivors(r);
            if (set.empty()) {
                t.reset();  // a peer that died before the average
                sync.arrive_and_drop();
                return;
            }
            std::vector<float> x(size);
            for (std::size_t k = 0; k < size; ++k) x[k] = static_cast<float>(r + 0.1 * k);
            auto& me = out[static_cast<std::size_t>(r)];
            try {
                peer::AverageOptions ao;
                ao.timeout = timeout;
                std::vector<tp::Message> pending;
                me.result = peer::exact_average(*t, set, x, 1.0 + r, pending, ao);
            } catch (const PeerFailure& e) {
                me.error = e.what();
                me.failed_rank = e.rank();
            } catch (const std::exception& e) {
                me.error = e.what();
            }
            sync.arrive_and_wait();  // keep the transport until everyone is done
        });
    threads.clear();
    return out;
}

}  // namespace

TEST_CASE("the exact average is the mass-weighted mean and the same on every survivor") {
    for (int n : {1, 2, 4, 5}) {
        CAPTURE(n);
        const std::size_t size = 13;  // not a multiple of n: uneven segments
        std::vector<int> all;
        for (int r = 0; r < n; ++r) all.push_back(r);
        auto out = run(n, size, [&](int) { return all; });
        double total = 0;
        for (int r = 0; r < n; ++r) total += 1.0 + r;
        for (int r = 0; r < n; ++r) {
            CAPTURE(r);
            const auto& o = out[static_cast<std::size_t>(r)];
            REQUIRE_MESSAGE(o.result, o.error);
            CHECK(o.result->total_mass == doctest::Approx(total));
            for (std::size_t k = 0; k < size; ++k) {
                double want = 0;
                for (int j = 0; j < n; ++j) want += (1.0 + j) * (j + 0.1 * k);
                CHECK(o.result->model[k] == doctest::Approx(want / total).epsilon(1e-5));
                CHECK(o.result->model[k] == out[0].result->model[k]);  // bitwise equal
            }
        }
    }
}

TEST_CASE("the survivors average without a peer that died before the end") {
    auto out = run(4, 7, [](int r) { return r == 2 ? std::vector<int>{} : std::vector{0, 1, 3}; });
    for (int r : {0, 1, 3}) {
        const auto& o = out[static_cast<std::size_t>(r)];
        REQUIRE_MESSAGE(o.result, o.error);
        CHECK(o.result->total_mass == doctest::Approx(1 + 2 + 4));
    }
}

TEST_CASE("a survivor that is gone stops the average with a line naming it") {
    auto out = run(3, 5, [](int r) { return r == 1 ? std::vector<int>{} : std::vector{0, 1, 2}; });
    for (int r : {0, 2}) {
        const auto& o = out[static_cast<std::size_t>(r)];
        CHECK_FALSE(o.result);
        CHECK_MESSAGE(o.error.find("peer 1") != std::string::npos, o.error);
        CHECK(o.error.find('\n') == std::string::npos);
    }
}

TEST_CASE("peers with different survivor sets refuse to mix their sums") {
    // Rank 3 died; rank 0 has not noticed it, ranks 1 and 2 have.
    auto out = run(
        4, 5,
        [](int r) {
            if (r == 3) return std::vector<int>{};
            return r == 0 ? std::vector{0, 1, 2, 3} : std::vector{0, 1, 2};
        },
        tp::Duration{1500});
    CHECK_FALSE(out[0].result);
    CHECK_FALSE(out[1].result);
    CHECK_MESSAGE(out[1].error.find("another set of survivors") != std::string::npos, out[1].error);
}
