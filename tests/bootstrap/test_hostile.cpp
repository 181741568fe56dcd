// The listener under connections that never shake hands (docs/operations/reliability.md,
// "Security"): their number is bounded (Options::max_pending), so a slow-loris holding 1,000 idle
// connections neither exhausts rank 0's descriptors nor keeps a peer of the job out; a frame
// that announces more than a handshake can hold is refused before its body is read.
#include <doctest/doctest.h>

#include "cluster.hpp"
// (cluster.hpp first: it includes <utility> before Boost.Asio)
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "wire.hpp"

using namespace gossamer::test;
namespace asio = boost::asio;

namespace {

/// `count` connections to `where` that never send a byte (non-blocking connects: the test
/// never waits on one); all closed when it goes.
class IdleConnections {
  public:
    IdleConnections(const bs::Endpoint& where, int count) {
        sockaddr_in to{};
        to.sin_family = AF_INET;
        to.sin_port = htons(static_cast<std::uint16_t>(where.port));
        REQUIRE(inet_pton(AF_INET, where.host.c_str(), &to.sin_addr) == 1);
        for (int i = 0; i < count; ++i) {
            const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            REQUIRE_MESSAGE(fd >= 0, "socket(): " << std::strerror(errno));
            fds_.push_back(fd);
            const int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to);
            REQUIRE_MESSAGE((rc == 0 || errno == EINPROGRESS),
                            "connect(): " << std::strerror(errno));
        }
    }
    ~IdleConnections() {
        for (int fd : fds_) ::close(fd);
    }
    IdleConnections(const IdleConnections&) = delete;
    IdleConnections& operator=(const IdleConnections&) = delete;

  private:
    std::vector<int> fds_;
};

/// Lowers this process's soft limit on open descriptors for one test, and restores it.
class DescriptorLimit {
  public:
    explicit DescriptorLimit(rlim_t soft) {
        REQUIRE(::getrlimit(RLIMIT_NOFILE, &saved_) == 0);
        rlimit lower = saved_;
        lower.rlim_cur = std::min(soft, saved_.rlim_max);
        REQUIRE(::setrlimit(RLIMIT_NOFILE, &lower) == 0);
    }
    ~DescriptorLimit() { ::setrlimit(RLIMIT_NOFILE, &saved_); }
    DescriptorLimit(const DescriptorLimit&) = delete;
    DescriptorLimit& operator=(const DescriptorLimit&) = delete;

  private:
    rlimit saved_{};
};

}  // namespace

TEST_SUITE("bootstrap") {
    TEST_CASE("a slow-loris of 1000 idle connections does not stop a job of 4 from starting") {
        // 1,400 descriptors for the whole process: the 1,000 idle client sockets, rank 0's
        // side of them and the peers. Without a bound rank 0 would need 1,000 more, run out
        // (EMFILE) and accept no peer until the idle ones time out (io_timeout, past
        // join_timeout here); with it, it holds at most max_pending of them.
        DescriptorLimit limit(1400);
        auto peers = start_peers(4, [](int r, std::vector<bs::Endpoint> eps) {
            auto o = quick_options(r, std::move(eps));
            o.io_timeout = 20s;    // idle connections are not timed out during the test
            o.join_timeout = 10s;  // the job must start well within it
            return std::optional<bs::Options>(o);
        });
        const auto start = std::chrono::steady_clock::now();
        IdleConnections loris(peers[0]->endpoint(), 1000);
        const std::uint64_t max_pending = bs::Options{}.max_pending;
        const std::uint64_t expected = 1000 - max_pending;
        wait_until([&] { return peers[0]->listener_stats().evicted >= expected; }, 10s);
        CHECK(peers[0]->listener_stats().evicted == expected);
        auto out = rendezvous_all(peers);
        const auto took = std::chrono::steady_clock::now() - start;
        for (std::size_t r = 0; r < out.size(); ++r) {
            CAPTURE(r);
            CHECK_MESSAGE(!out[r].failed, out[r].error);
            CHECK(out[r].table.size() == 4);
        }
        CHECK(took < 10s);
        const auto stats = peers[0]->listener_stats();
        CHECK(stats.refused == 0);
        CHECK(stats.malformed == 0);  // closed to make room: counted as evicted, not malformed
    }

    TEST_CASE("a frame announcing more than a handshake can hold is refused before its body") {
        auto eps = free_endpoints(1);
        auto o = quick_options(0, eps);
        o.io_timeout = 5s;
        bs::Bootstrap root(o);
        // A hello header that announces one byte more than the largest hello, and no body.
        auto head = bs::wire::frame(bs::wire::Kind::hello);
        const std::uint32_t length = bs::wire::kMaxHello + 1;
        for (int i = 0; i < 4; ++i) head[8 + i] = static_cast<std::uint8_t>(length >> (8 * i));
        asio::io_context io;
        asio::ip::tcp::socket s(io);
        s.connect({asio::ip::make_address(eps[0].host), static_cast<unsigned short>(eps[0].port)});
        const auto start = std::chrono::steady_clock::now();
        asio::write(s, asio::buffer(head));
        char sink[16];
        boost::system::error_code ec;
        s.read_some(asio::buffer(sink), ec);  // returns when rank 0 hangs up
        CHECK(ec);
        CHECK(std::chrono::steady_clock::now() - start < 2s);  // not the 5 s io_timeout
        CHECK(root.listener_stats().malformed == 1);
    }

    TEST_CASE("max_pending below 1 is refused at construction") {
        auto o = quick_options(0, free_endpoints(1));
        o.max_pending = 0;
        CHECK_THROWS_WITH_AS(bs::Bootstrap{o}, doctest::Contains("max_pending: must be at least 1"),
                             gossamer::ConfigError);
    }
}
