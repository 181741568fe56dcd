#include <fmt/format.h>

#include "gossamer/core/log.hpp"
#include "impl.hpp"

namespace gossamer::bootstrap {

void spawn(asio::io_context& io, asio::awaitable<void> task, const char* what) {
    asio::co_spawn(io, std::move(task), [what](std::exception_ptr e) {
        if (!e) return;
        try {
            std::rethrow_exception(e);
        } catch (const std::exception& ex) {
            log::error("bootstrap: {} stopped: {}", what, ex.what());
        }
    });
}

Bootstrap::Impl::Impl(Options options) : opt(std::move(options)) {
    n = static_cast<int>(opt.peers.size());
    if (n == 0) throw BootstrapError(Reason::bad_rank, {}, "the bootstrap needs at least one peer");
    if (opt.rank < 0 || opt.rank >= n)
        throw BootstrapError(Reason::bad_rank, {opt.rank},
                             fmt::format("rank {} is out of range for {} peers (ranks run from "
                                         "0 to {})",
                                         opt.rank, n, n - 1));
    auto positive = [](Millis d, const char* what) {
        if (d <= Millis(0))
            throw ConfigError("", what, fmt::format("must be positive, got {} ms", d.count()));
    };
    positive(opt.join_timeout, "join_timeout");
    positive(opt.io_timeout, "io_timeout");
    positive(opt.retry_interval, "retry_interval");
    positive(opt.heartbeat_interval, "heartbeat_interval");
    if (opt.clock_samples < 1)
        throw ConfigError("", "clock_samples",
                          fmt::format("must be at least 1, got {}", opt.clock_samples));
    if (opt.min_peers < 0 || opt.min_peers > n)
        throw ConfigError("", "min_peers",
                          fmt::format("must be from 1 to the {} peers of the job (0: all), got {}",
                                      n, opt.min_peers));
    for (int r : opt.late)
        if (r < 1 || r >= n)
            throw ConfigError("", "late",
                              fmt::format("rank {} cannot join late: ranks 1 to {} can (rank 0 "
                                          "starts the job)",
                                          r, n - 1));
    if (opt.max_pending < 1)
        throw ConfigError("", "max_pending",
                          fmt::format("must be at least 1, got {}", opt.max_pending));
    if (opt.heartbeat_timeout < 2 * opt.heartbeat_interval)
        throw ConfigError(
            "", "heartbeat_timeout",
            fmt::format("{} ms is shorter than two heartbeat intervals ({} ms)",
                        opt.heartbeat_timeout.count(), 2 * opt.heartbeat_interval.count()),
            "a live peer would be reported lost after one late heartbeat; raise it");
    count_only = wire::count_only(opt.peers);
    if (count_only && opt.peers[0].port == 0)
        throw ConfigError("", "rendezvous", "rank 0's port is not known, so no peer can join it",
                          "give rank 0's endpoint (the rendezvous) a port");
    for (const auto& e : opt.peers)
        if (e.host.size() > wire::kMaxHost)
            throw ConfigError("", "peers",
                              fmt::format("the host name '{}...' is longer than {} bytes",
                                          e.host.substr(0, 40), wire::kMaxHost));
    fingerprint = wire::peers_fingerprint(opt.peers);
    self = opt.peers[static_cast<std::size_t>(opt.rank)];
    known_peers = opt.peers;
    members.resize(static_cast<std::size_t>(n));
    blobs.resize(static_cast<std::size_t>(n));
    joined.assign(static_cast<std::size_t>(n), false);
    gone.assign(static_cast<std::size_t>(n), false);
    refusals.resize(static_cast<std::size_t>(n));
    awaited.resize(static_cast<std::size_t>(n));
    incarnation.assign(static_cast<std::size_t>(n), 0);
    expel_later.resize(static_cast<std::size_t>(n));
    if (opt.warn_interval <= Millis(0)) opt.warn_interval = Millis(10000);
}

std::string Bootstrap::Impl::name(int rank) const {
    const auto& e = opt.peers[static_cast<std::size_t>(rank)];
    if (e.port == 0) return fmt::format("rank {}", rank);  // not known yet (count-only job)
    return fmt::format("rank {} ({})", rank, e.str());
}

std::int64_t Bootstrap::Impl::unix_us() const {
    using namespace std::chrono;
    return duration_cast<microseconds>(system_clock::now().time_since_epoch()).count() +
           opt.clock_skew.count();
}

void Bootstrap::Impl::listen() {
    auto cannot = [&](Reason reason, const std::string& why, const std::string& fix) {
        return BootstrapError(
            reason, {opt.rank},
            fmt::format("rank {} cannot listen on {}: {}; {}", opt.rank, self.str(), why, fix));
    };
    boost::system::error_code ec;
    tcp::resolver resolver(io);
    auto found = resolver.resolve(self.host, std::to_string(self.port),
                                  tcp::resolver::passive | tcp::resolver::numeric_service, ec);
    if (ec || found.empty())
        throw cannot(Reason::cannot_listen, ec ? ec.message() : "no address",
                     "check the host name in the topology file");
    tcp::endpoint where = found.begin()->endpoint();
    acceptor.open(where.protocol(), ec);
    if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor.bind(where, ec);
    if (ec == asio::error::address_in_use)
        throw cannot(Reason::address_in_use, "address in use",
                     count_only && opt.rank == 0
                         ? "the rendezvous port is taken (another job, or a peer still running); "
                           "pick another with --rendezvous-port or GOSSAMER_RENDEZVOUS_PORT "
                           "(the same for every peer) or stop the process using it"
                         : "pick another port in the topology file or stop the process using it");
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
        throw cannot(
            Reason::cannot_listen, ec.message(),
            fmt::format("check that rank {} runs on the host the topology file names", opt.rank));
    self.port = acceptor.local_endpoint().port();
    opt.peers[static_cast<std::size_t>(opt.rank)].port = self.port;  // a port the kernel gave
    std::lock_guard lock(mu);
    known_peers = opt.peers;
}

void Bootstrap::Impl::finish(std::vector<Blob> result) {
    std::lock_guard lock(mu);
    if (finished) return;
    finished = true;
    table = std::move(result);
    known_peers = opt.peers;
    cv.notify_all();
}

void Bootstrap::Impl::fail(BootstrapError error) {
    log::error("{}", error.what());
    std::lock_guard lock(mu);
    if (finished) return;
    finished = true;
    failure = std::move(error);
    cv.notify_all();
}

void Bootstrap::Impl::shutdown() {
    stopping = true;
    boost::system::error_code ec;
    acceptor.close(ec);
    join_timer.cancel();
    close_warn_window(true);
    heartbeat_timer.cancel();
    for (auto& m : members) {
        if (!m) continue;
        m->send(wire::frame(wire::Kind::bye));
        m->close_after_flush();
    }
    // A rejoin in flight may have been welcomed already: its coordinator watches it as this
    // peer's connection, and an end without a goodbye there reads as a crash (lab faults,
    // issue 37: rank 3 stopped while it followed rank 1 and was logged as vanished).
    for (auto& w : asking)
        if (auto c = w.lock()) {
            c->send(wire::frame(wire::Kind::bye));
            c->close_after_flush();
        }
    asking.clear();
    for (auto& e : expel_later)
        if (e) e->conn->close();
}

void Bootstrap::Impl::crash() {
    stopping = true;
    boost::system::error_code ec;
    acceptor.close(ec);
    heartbeat_timer.cancel();
    for (auto& m : members)
        if (m) m->close();
    for (auto& w : asking)
        if (auto c = w.lock()) c->close();
    asking.clear();
    for (auto& e : expel_later)
        if (e) e->conn->close();
}

Bootstrap::Bootstrap(Options options) : impl_(std::make_unique<Impl>(std::move(options))) {
    impl_->listen();
    spawn(impl_->io, impl_->accept_loop(), "the listener");
    impl_->work.emplace(impl_->io.get_executor());
    impl_->thread = std::thread([impl = impl_.get()] {
        impl->io.run();
        std::lock_guard lock(impl->mu);
        impl->io_stopped = true;
        impl->cv.notify_all();
    });
}

Bootstrap::~Bootstrap() {
    asio::post(impl_->io, [impl = impl_.get()] { impl->shutdown(); });
    impl_->work.reset();
    {
        // Goodbyes get a moment to leave; a peer that does not read cannot hold us up.
        std::unique_lock lock(impl_->mu);
        impl_->cv.wait_for(lock, std::chrono::milliseconds(500), [&] { return impl_->io_stopped; });
    }
    impl_->io.stop();
    impl_->thread.join();
}

std::vector<Blob> Bootstrap::rendezvous(std::span<const std::byte> address) {
    return impl_->enter(address, false);
}

std::vector<Blob> Bootstrap::Impl::enter(std::span<const std::byte> address, bool joining) {
    {
        std::lock_guard lock(mu);
        if (rendezvous_called) throw std::logic_error("Bootstrap::rendezvous or join called twice");
        rendezvous_called = true;
    }
    Blob blob(address.begin(), address.end());
    if (blob.size() > wire::kMaxBlob)
        throw BootstrapError(Reason::malformed, {opt.rank},
                             fmt::format("rank {}: an address blob of {} bytes exceeds the limit "
                                         "of {} bytes",
                                         opt.rank, blob.size(), wire::kMaxBlob));
    if (joining)
        spawn(io, join_running(std::move(blob)), "joining the running job");
    else if (opt.rank == 0)
        asio::post(io,
                   [this, blob = std::move(blob)]() mutable { start_as_root(std::move(blob)); });
    else
        spawn(io, join_root(std::move(blob)), "joining rank 0");

    // The bootstrap thread always ends the rendezvous by its own deadlines; this wait is a
    // safety net that outlasts them.
    auto limit = 2 * (opt.join_timeout + opt.io_timeout) + std::chrono::seconds(1);
    std::unique_lock lock(mu);
    if (!cv.wait_for(lock, limit, [&] { return finished; }))
        throw BootstrapError(Reason::connection_lost, {},
                             fmt::format("rank {}: the rendezvous did not end within {}", opt.rank,
                                         seconds(std::chrono::duration_cast<Millis>(limit))));
    if (failure) throw *failure;
    return table;
}

void Bootstrap::on_peer_lost(std::function<void(const PeerLoss&)> callback) {
    std::lock_guard lock(impl_->mu);
    impl_->on_lost = std::move(callback);
}

std::vector<PeerLoss> Bootstrap::lost_peers() const {
    std::lock_guard lock(impl_->mu);
    return impl_->losses;
}

ClockOffset Bootstrap::clock_offset() const {
    std::lock_guard lock(impl_->mu);
    return impl_->clock;
}

ListenerStats Bootstrap::listener_stats() const {
    std::lock_guard lock(impl_->mu);
    return impl_->stats;
}

const Endpoint& Bootstrap::endpoint() const noexcept {
    return impl_->self;
}
std::vector<Endpoint> Bootstrap::peers() const {
    std::lock_guard lock(impl_->mu);
    return impl_->known_peers;
}

int Bootstrap::rank() const noexcept {
    return impl_->opt.rank;
}

void Bootstrap::inject_fault(Fault fault) {
    asio::post(impl_->io, [impl = impl_.get(), fault] {
        if (fault == Fault::silence)
            impl->silenced = true;
        else
            impl->crash();
    });
}

}  // namespace gossamer::bootstrap
