#pragma once
// N bootstrap peers as threads in one process on 127.0.0.1, with free ports and short timeouts.

// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// (keep the line above first)
#include <boost/asio.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gossamer/bootstrap/bootstrap.hpp"

namespace gossamer::test {

namespace bs = gossamer::bootstrap;
using namespace std::chrono_literals;

/// n distinct ports that were free a moment ago (bound to port 0 together, then released).
inline std::vector<bs::Endpoint> free_endpoints(int n) {
    boost::asio::io_context io;
    std::vector<boost::asio::ip::tcp::acceptor> held;
    std::vector<bs::Endpoint> out;
    auto any = boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0);
    for (int i = 0; i < n; ++i) {
        held.emplace_back(io, any);
        out.push_back({"127.0.0.1", held.back().local_endpoint().port()});
    }
    return out;
}

/// Options for `rank` with timeouts short enough for a fast suite.
inline bs::Options quick_options(int rank, std::vector<bs::Endpoint> peers) {
    bs::Options o;
    o.rank = rank;
    o.peers = std::move(peers);
    o.job_id = 42;
    o.token = "secret";
    o.model_size = 130;
    o.layout = PartitionLayout({{"fc1", 0, 100}, {"fc2", 100, 30}}, 130);
    o.join_timeout = 2s;
    o.io_timeout = 1s;
    o.retry_interval = 50ms;
    o.heartbeat_interval = 100ms;
    o.heartbeat_timeout = 800ms;
    return o;
}

/// The address blob rank r offers: distinct contents and sizes per rank.
inline bs::Blob blob_of(int rank) {
    std::string text = "ucx-worker-address-of-rank-" + std::to_string(rank);
    text.append(static_cast<std::size_t>(rank) * 7, 'x');
    bs::Blob b;
    for (char c : text) b.push_back(static_cast<std::byte>(c));
    return b;
}

/// What one peer's rendezvous gave.
struct Outcome {
    std::vector<bs::Blob> table;
    bool failed = false;
    bs::Reason reason{};
    std::vector<int> ranks;
    std::string error;
};

/// Runs rendezvous() on every non-null peer in its own thread and collects the outcomes.
inline std::vector<Outcome> rendezvous_all(std::vector<std::unique_ptr<bs::Bootstrap>>& peers) {
    std::vector<Outcome> out(peers.size());
    std::vector<std::thread> threads;
    for (std::size_t r = 0; r < peers.size(); ++r) {
        if (!peers[r]) continue;
        threads.emplace_back([&, r] {
            try {
                out[r].table = peers[r]->rendezvous(blob_of(static_cast<int>(r)));
            } catch (const bs::BootstrapError& e) {
                out[r] = {{}, true, e.reason(), e.ranks(), e.what()};
            }
        });
    }
    for (auto& t : threads) t.join();
    return out;
}

/// Builds the peers whose options `make` returns (nullopt: that rank is not started). Retries
/// with fresh ports when another process took one of them meanwhile.
inline std::vector<std::unique_ptr<bs::Bootstrap>> start_peers(
    int n, const std::function<std::optional<bs::Options>(int, std::vector<bs::Endpoint>)>& make) {
    for (int attempt = 0;; ++attempt) {
        auto endpoints = free_endpoints(n);
        std::vector<std::unique_ptr<bs::Bootstrap>> peers(static_cast<std::size_t>(n));
        try {
            for (int r = 0; r < n; ++r)
                if (auto o = make(r, endpoints))
                    peers[static_cast<std::size_t>(r)] = std::make_unique<bs::Bootstrap>(*o);
            return peers;
        } catch (const bs::BootstrapError& e) {
            if (e.reason() != bs::Reason::address_in_use || attempt == 4) throw;
        }
    }
}

inline std::vector<std::unique_ptr<bs::Bootstrap>> start_peers(int n) {
    return start_peers(n, [](int r, std::vector<bs::Endpoint> eps) {
        return std::optional<bs::Options>(quick_options(r, std::move(eps)));
    });
}

/// Polls `done` until it holds or `limit` passes; returns the time it took (or limit).
template <typename F>
std::chrono::milliseconds wait_until(F done, std::chrono::milliseconds limit) {
    auto start = std::chrono::steady_clock::now();
    while (!done()) {
        auto spent = std::chrono::steady_clock::now() - start;
        if (spent >= limit) return limit;
        std::this_thread::sleep_for(10ms);
    }
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 start);
}

inline bool has(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

}  // namespace gossamer::test
