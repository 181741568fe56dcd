#pragma once
// TCP ports on 127.0.0.1 that the kernel hands out as free now: tests that start peers side by
// side under ctest -j take these instead of fixed ports, so two jobs never share one.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>
#include <vector>

namespace gossamer::test {

/// n distinct ports, free a moment ago (all are held open together, then released).
inline std::vector<int> free_ports(int n) {
    std::vector<int> fds, ports;
    for (int i = 0; i < n; ++i) {
        const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
            if (fd >= 0) ::close(fd);
            for (int f : fds) ::close(f);
            throw std::runtime_error("free_ports: no free port on 127.0.0.1");
        }
        fds.push_back(fd);
        ports.push_back(ntohs(a.sin_port));
    }
    for (int fd : fds) ::close(fd);
    return ports;
}

}  // namespace gossamer::test
