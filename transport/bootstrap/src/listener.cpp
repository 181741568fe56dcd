// The listener: accepting connections, bounding those that have not shaken hands yet
// (Options::max_pending, docs/operations/reliability.md "Security"), refusing garbage, and warning
// about it without flooding the log.
#include <fmt/format.h>

#include <algorithm>

#include "gossamer/core/log.hpp"
#include "impl.hpp"

namespace gossamer::bootstrap {

asio::awaitable<void> Bootstrap::Impl::accept_loop() {
    for (;;) {
        boost::system::error_code ec;
        tcp::socket socket =
            co_await acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
        if (stopping || !acceptor.is_open()) co_return;
        if (ec) {
            // Out of descriptors and the like: say so, breathe, keep serving.
            warn_listener(fmt::format("{}: accept failed: {}", name(opt.rank), ec.message()));
            asio::steady_timer pause(io, std::chrono::milliseconds(100));
            co_await pause.async_wait(asio::use_awaitable);
            continue;
        }
        auto conn = std::make_shared<Connection>(std::move(socket));
        admit_pending(conn);
        spawn(io, serve(std::move(conn)), "a handshake");
    }
}

// Bounds the connections that have not shaken hands (a slow-loris, a port scan): past
// max_pending the oldest is closed. A peer of the job sends its hello at once, so it is never
// the oldest for long; an idle connection is, and gives way.
void Bootstrap::Impl::admit_pending(const std::shared_ptr<Connection>& conn) {
    std::erase_if(pending, [](const std::weak_ptr<Connection>& w) {
        auto c = w.lock();
        return !c || !c->pending || !c->is_open();
    });
    std::uint64_t evicted = 0;
    while (pending.size() >= static_cast<std::size_t>(opt.max_pending)) {
        if (auto oldest = pending.front().lock()) {
            oldest->evicted = true;
            oldest->close();
            ++evicted;
        }
        pending.pop_front();
    }
    conn->pending = true;
    pending.push_back(conn);
    if (evicted == 0) return;
    std::uint64_t total = 0;
    {
        std::lock_guard lock(mu);
        total = stats.evicted += evicted;
    }
    warn_listener(
        fmt::format("{}: more than {} connections without a handshake at once: "
                    "closed the oldest ({} so far)",
                    name(opt.rank), opt.max_pending, total));
}

void Bootstrap::Impl::refuse_garbage(Connection& conn, const std::string& why) {
    std::uint64_t count = 0;
    {
        std::lock_guard lock(mu);
        count = ++stats.malformed;
    }
    warn_listener(fmt::format("{} refused a connection from {}: {} ({} malformed so far)",
                              name(opt.rank), conn.remote(), why, count));
    conn.close();
}

// The first few warnings of a window are shown; the others are counted and summed up in one
// line when the window closes. A window that held some back is followed by another, so a
// steady flood gives one line per warn_interval; a quiet window resets the budget.
void Bootstrap::Impl::warn_listener(std::string line) {
    if (warnings_shown < kWarningsShown) {
        ++warnings_shown;
        log::warn("{}", line);
    } else {
        ++warnings_held;
        last_held = std::move(line);
    }
    if (!warn_window_open && !stopping) open_warn_window();
}

void Bootstrap::Impl::open_warn_window() {
    warn_window_open = true;
    warn_timer.expires_after(opt.warn_interval);
    warn_timer.async_wait([this](boost::system::error_code ec) {
        if (!ec) close_warn_window(false);
    });
}

void Bootstrap::Impl::close_warn_window(bool final) {
    warn_window_open = false;
    if (final) warn_timer.cancel();
    if (warnings_held == 0) {
        warnings_shown = 0;
        return;
    }
    log::warn("{}: {} more listener warning{} in the last {} not shown (the latest: {})",
              name(opt.rank), warnings_held, warnings_held == 1 ? "" : "s",
              seconds(opt.warn_interval), last_held);
    warnings_held = 0;
    if (final || stopping) return;
    warnings_shown = kWarningsShown;  // still busy: the next window only sums up
    open_warn_window();
}

}  // namespace gossamer::bootstrap
