#include "gossamer/launch/local_ports.hpp"

#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "gossamer/core/error.hpp"

namespace gossamer::launch {
namespace {

/// A socket bound to host:port (port 0: any), or -1. `err` gets errno on failure.
int bind_socket(const std::string& host, int port, int& err) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* found = nullptr;
    const auto service = std::to_string(port);
    if (::getaddrinfo(host.c_str(), service.c_str(), &hints, &found) != 0 || !found) {
        err = EADDRNOTAVAIL;
        return -1;
    }
    std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(found, ::freeaddrinfo);
    err = EADDRNOTAVAIL;
    for (addrinfo* a = found; a; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        const int one = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 1) == 0) return fd;
        err = errno;
        ::close(fd);
    }
    return -1;
}

int port_of(int fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return -1;
    if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
    return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
}

}  // namespace

bool is_local_host(const std::string& host) {
    int err = 0;
    const int fd = bind_socket(host, 0, err);
    if (fd < 0) return false;
    ::close(fd);
    return true;
}

bool port_free(const std::string& host, int port) {
    int err = 0;
    const int fd = bind_socket(host, port, err);
    if (fd < 0) return false;
    ::close(fd);
    return true;
}

std::vector<int> free_ports(const std::string& host, int n) {
    std::vector<int> fds, ports;
    for (int i = 0; i < n; ++i) {  // all held at once, so the kernel gives distinct ports
        int err = 0;
        const int fd = bind_socket(host, 0, err);
        if (fd < 0) {
            for (int f : fds) ::close(f);
            throw Error(fmt::format("no free TCP port on {}: {}", host, std::strerror(err)));
        }
        fds.push_back(fd);
        ports.push_back(port_of(fd));
    }
    for (int f : fds) ::close(f);
    return ports;
}

}  // namespace gossamer::launch
