// TCP flows between the lab's peers, each thread in its peer's namespace (blast.hpp).
#include "gossamer/lab/blast.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <limits>
#include <thread>

#include "gossamer/core/error.hpp"
#include "gossamer/lab/system.hpp"

namespace gossamer::lab {
namespace {

// How much longer than `seconds` the senders may run while `while_sending` measures.
constexpr double kMeasureSlack = 30.0;

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

int ms_until(double deadline) {
    const double left = deadline - now_s();
    return left <= 0 ? 0 : static_cast<int>(left * 1000) + 1;
}

sockaddr_in endpoint(const std::string& address, int port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    ::inet_pton(AF_INET, address.c_str(), &a.sin_addr);
    return a;
}

std::string sys_error(const char* what) {
    return fmt::format("{}: {}", what, std::strerror(errno));
}

struct Shared {
    std::atomic<int> listening{0}, connected{0}, failed{0};
    std::atomic<double> end{std::numeric_limits<double>::infinity()};
    std::atomic<double> start{std::numeric_limits<double>::infinity()};  // every flow connected
    double hard_end = 0.0;  // no thread runs past this, whatever happens
};

void receive(const Lab& lab, const Flow& f, int port, Shared& sh, FlowResult& out) {
    int fd = -1, conn = -1;
    bool counted = false;
    try {
        enter_netns(lab.hosts()[f.to].netns);
        fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) throw Error(sys_error("socket"));
        const int one = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        auto a = endpoint(lab.hosts()[f.to].address, port);
        if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
            throw Error(sys_error("bind"));
        if (::listen(fd, 1) != 0) throw Error(sys_error("listen"));
        ++sh.listening;
        counted = true;
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, ms_until(sh.hard_end)) <= 0) throw Error("no sender connected in time");
        conn = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (conn < 0) throw Error(sys_error("accept"));
        std::vector<char> buf(1 << 18);
        double last = 0;
        while (now_s() < sh.hard_end) {
            pollfd q{conn, POLLIN, 0};
            if (::poll(&q, 1, std::min(ms_until(sh.hard_end), 500)) <= 0) continue;
            const ssize_t got = ::recv(conn, buf.data(), buf.size(), 0);
            if (got > 0) {
                out.received += static_cast<std::uint64_t>(got);
                last = now_s();
            } else if (got == 0 || errno != EINTR) {
                break;  // the sender closed (or reset): done
            }
        }
        out.seconds =
            out.received > 0 ? last - sh.start.load() : std::numeric_limits<double>::quiet_NaN();
    } catch (const std::exception& e) {
        if (out.error.empty()) out.error = fmt::format("receiver: {}", e.what());
        if (!counted) ++sh.failed;
    }
    if (conn >= 0) ::close(conn);
    if (fd >= 0) ::close(fd);
}

void send_flow(const Lab& lab, const Flow& f, int port, double connect_s, std::uint64_t max_bytes,
               bool together, Shared& sh, FlowResult& out) {
    int fd = -1;
    bool connected = false;
    try {
        enter_netns(lab.hosts()[f.from].netns);
        const double connect_deadline = now_s() + connect_s;
        auto a = endpoint(lab.hosts()[f.to].address, port);
        while (true) {  // the receiver may not listen yet: retry until the deadline
            fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
            if (fd < 0) throw Error(sys_error("socket"));
            int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
            if (rc != 0 && errno == EINPROGRESS) {
                pollfd p{fd, POLLOUT, 0};
                if (::poll(&p, 1, ms_until(connect_deadline)) > 0) {
                    int err = 0;
                    socklen_t len = sizeof err;
                    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
                    rc = err == 0 ? 0 : -1;
                    errno = err;
                }
            }
            if (rc == 0) break;
            const int saved = errno;
            ::close(fd);
            fd = -1;
            if (now_s() >= connect_deadline)
                throw Error(fmt::format("connect to {}:{}: {}", lab.hosts()[f.to].address, port,
                                        std::strerror(saved)));
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        ++sh.connected;
        connected = true;
        while (together && sh.start.load() > now_s() && now_s() < sh.hard_end)
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        std::vector<char> buf(1 << 18, 'g');
        while (out.sent < max_bytes) {
            const double end = std::min(sh.end.load(), sh.hard_end);
            if (now_s() >= end) break;
            pollfd p{fd, POLLOUT, 0};
            if (::poll(&p, 1, std::min(ms_until(end), 200)) <= 0) continue;
            const std::size_t want =
                static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), max_bytes - out.sent));
            const ssize_t put = ::send(fd, buf.data(), want, MSG_NOSIGNAL);
            if (put > 0) {
                out.sent += static_cast<std::uint64_t>(put);
            } else if (errno != EAGAIN && errno != EINTR) {
                throw Error(sys_error("send"));
            }
        }
    } catch (const std::exception& e) {
        if (out.error.empty()) out.error = fmt::format("sender: {}", e.what());
        if (!connected) ++sh.failed;
    }
    if (fd >= 0) ::close(fd);
}

}  // namespace

std::vector<FlowResult> blast(const Lab& lab, const std::vector<Flow>& flows,
                              const BlastOptions& o) {
    const int n = static_cast<int>(lab.hosts().size());
    for (const auto& f : flows)
        if (f.from < 0 || f.from >= n || f.to < 0 || f.to >= n || f.from == f.to)
            throw Error(fmt::format("blast: flow {} -> {} is not between two of the {} peers",
                                    f.from, f.to, n));
    if (!(o.seconds > 0 && o.seconds <= 600))
        throw Error(fmt::format("blast: {} s is outside (0, 600]", o.seconds));
    Shared sh;
    sh.hard_end = now_s() + o.connect_timeout_s + o.seconds + 2.0;
    if (o.while_sending) sh.hard_end += kMeasureSlack;
    std::vector<FlowResult> results(flows.size());
    std::vector<std::thread> threads;
    const int k_count = static_cast<int>(flows.size());
    for (int k = 0; k < k_count; ++k) {
        results[k].flow = flows[k];
        threads.emplace_back(receive, std::cref(lab), flows[k], o.base_port + k, std::ref(sh),
                             std::ref(results[k]));
    }
    for (int k = 0; k < k_count; ++k)
        threads.emplace_back(send_flow, std::cref(lab), flows[k], o.base_port + k,
                             o.connect_timeout_s, o.max_bytes, o.start_together, std::ref(sh),
                             std::ref(results[k]));
    // Every sender connected (or given up): the common sending window starts now.
    const double connect_deadline = now_s() + o.connect_timeout_s + 0.5;
    while (sh.connected + sh.failed < k_count && now_s() < connect_deadline)
        std::this_thread::sleep_for(std::chrono::microseconds(500));
    sh.start = now_s();
    if (o.while_sending && sh.connected > 0) {
        sh.end = now_s() + o.seconds + kMeasureSlack;
        o.while_sending();
        sh.end = now_s();  // the measurement is done: stop sending
    } else {
        sh.end = now_s() + o.seconds;
    }
    for (auto& t : threads) t.join();
    return results;
}

}  // namespace gossamer::lab
