#pragma once
/// TCP ports on this machine for `gossamer launch`: whether a host is one of this machine's
/// addresses, whether a port is free there, and fresh free ports.

#include <string>
#include <vector>

namespace gossamer::launch {

/// Whether `host` (a name or an address) resolves to an address of this machine (a TCP socket
/// can bind to it).
bool is_local_host(const std::string& host);

/// Whether a listener could bind `host:port` now (with SO_REUSEADDR, as the bootstrap binds).
bool port_free(const std::string& host, int port);

/// `n` distinct ports on `host` that were free a moment ago (the kernel's ephemeral choice).
/// Throws Error when the system has none to give.
std::vector<int> free_ports(const std::string& host, int n);

}  // namespace gossamer::launch
