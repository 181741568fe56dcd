// Succession (docs/modules/bootstrap.md, "Succession"): the coordinator (rank 0 at the start)
// watches liveness, relays losses and installs views. When a member loses it, the member turns to
// the lowest rank of its installed view that it has not lost: that peer takes over, the others
// follow it with a rejoin frame, and the new coordinator proposes the view without the old one
// (installed once a majority of the previous view acknowledged it, as before). A member that the
// next coordinator refuses because it still follows the old one is the one cut off. Bootstrap
// thread.
#include <fmt/format.h>

#include "gossamer/bootstrap/environment.hpp"
#include "gossamer/core/log.hpp"
#include "impl.hpp"

namespace gossamer::bootstrap {

void Bootstrap::Impl::succeed() {
    if (stopping || is_coord() || silenced) return;
    {
        // An expelled peer is out of the job: its coordinator closed on it on purpose.
        std::lock_guard lock(mu);
        if (expelled_line) return;
    }
    int next = opt.rank;
    for (int r : view.members)
        if (!gone[static_cast<std::size_t>(r)]) {
            next = r;
            break;
        }
    {
        std::lock_guard lock(mu);
        coord = next;
        root_lost = next != opt.rank;
    }
    cv.notify_all();
    if (next == opt.rank) {
        take_over();
        return;
    }
    log::debug("{}: turns to {}, the lowest live rank of view {}, as the next coordinator",
               name(opt.rank), name(next), view.number);
    // The next coordinator notices the loss within about one heartbeat timeout of this peer
    // (the old one's heartbeats stopped for both), and answers not_coordinator until then.
    const auto deadline =
        Clock::now() + opt.heartbeat_timeout + 2 * opt.heartbeat_interval + opt.io_timeout;
    spawn(io, follow(next, deadline), "following the next coordinator");
}

void Bootstrap::Impl::take_over() {
    {
        std::lock_guard lock(mu);
        coord = opt.rank;
        root_lost = false;
    }
    cv.notify_all();
    log::write(coord_left ? log::Level::debug : log::Level::info,
               fmt::format("{}: takes over as the job's coordinator (the lowest live rank of view "
                           "{}): it relays losses and installs views from now on",
                           name(opt.rank), view.number));
    // Members that do not follow by the time the last of them should have noticed the loss
    // (their heartbeat timeout, a refused first try, a connect) are lost.
    const auto until =
        Clock::now() + opt.heartbeat_timeout + 2 * opt.heartbeat_interval + 2 * opt.io_timeout;
    for (int r : view.members) {
        const auto i = static_cast<std::size_t>(r);
        if (r != opt.rank && !gone[i] && !(members[i] && members[i]->is_open())) awaited[i] = until;
    }
    propose_view(coord_left);
    heartbeat_timer.cancel();  // beat() again now: the new deadlines count
    asio::post(io, [this] { beat(); });
}

asio::awaitable<void> Bootstrap::Impl::follow(int rank, Clock::time_point deadline) {
    const auto index = static_cast<std::size_t>(rank);
    auto still = [&] { return !stopping && coord == rank && !gone[index]; };
    // Losses met while turning to the next coordinator after a goodbye are goodbyes too: at the
    // end of a job every peer leaves, and none of them is a failure.
    // The line says "left" then, not "vanished": logs are searched for losses.
    auto give_up = [&](const std::string& why) {
        if (still())
            lose(rank,
                 fmt::format("{} {}: {} when this peer turned to it as the next coordinator{}",
                             name(rank), coord_left ? "is gone" : "vanished", why,
                             coord_left ? " (after the coordinator's goodbye: counted as having "
                                          "left the job, as at its end)"
                                        : ""),
                 false, coord_left);
    };
    for (;;) {
        if (!still()) co_return;
        // A hello without blob or settings: who it is and that it belongs to this job.
        auto hello = own_hello({}, self);
        hello.settings.clear();
        hello.layout_text.clear();
        auto answer =
            co_await ask(rank, wire::frame(wire::Kind::rejoin, wire::encode(hello)), deadline);
        if (!answer.conn && !answer.refusal) {
            give_up(answer.error);
            co_return;
        }
        if (!still()) {
            if (answer.conn) answer.conn->close();
            co_return;
        }
        if (answer.conn) {
            auto& conn = answer.conn;
            members[index] = conn;
            conn->last_heard = Clock::now();
            {
                std::lock_guard lock(mu);
                root_lost = false;
            }
            cv.notify_all();
            log::write(coord_left ? log::Level::debug : log::Level::info,
                       fmt::format("{}: follows {}, the job's new coordinator", name(opt.rank),
                                   name(rank)));
            for (const auto& [suspect, why] : held_reports)
                conn->send(wire::frame(
                    wire::Kind::suspect,
                    wire::encode(wire::Notice{static_cast<std::uint32_t>(suspect), {}, why})));
            held_reports.clear();
            co_await watch(conn, rank);
            co_return;
        }
        const wire::Notice& notice = *answer.refusal;
        const auto reason = static_cast<Reason>(notice.code);
        if (reason == Reason::not_coordinator && Clock::now() + opt.retry_interval < deadline) {
            asio::steady_timer pause(io, opt.retry_interval);
            boost::system::error_code ec;
            co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
            continue;
        }
        if (reason != Reason::not_coordinator && reason != Reason::not_member) {
            give_up("it refused this peer (" + notice.text + ")");
            co_return;
        }
        // The next coordinator still follows the old one (so the job goes on without this peer,
        // which lost it alone), or already declared this peer lost: either way it is cut off.
        const auto line =
            reason == Reason::not_member
                ? notice.text
                : fmt::format(
                      "{} is cut off from the job: it lost the coordinator, but {} still "
                      "follows it ({})",
                      name(opt.rank), name(rank), notice.text);
        if (coord_left) {
            log::debug("{}: {}", name(opt.rank), line);
            co_return;
        }
        {
            std::lock_guard lock(mu);
            expelled_line = line;
        }
        cv.notify_all();
        log::warn("{}: {}", name(opt.rank), line);
        co_return;
    }
}

void Bootstrap::Impl::refuse_rejoin(Connection& conn, Reason reason, std::string text) {
    log::debug("{} refused a rejoin from {}: {}", name(opt.rank), conn.remote(), text);
    conn.send(wire::frame(
        wire::Kind::refuse,
        wire::encode(wire::Notice{static_cast<std::uint32_t>(reason), {}, std::move(text)})));
    conn.close_after_flush();
}

asio::awaitable<void> Bootstrap::Impl::serve_rejoin(std::shared_ptr<Connection> conn,
                                                    wire::Hello hello) {
    const int r = static_cast<int>(hello.rank);
    // Only a member of this very job may follow: the same job, peer list and token.
    if (hello.job_id != opt.job_id || hello.n != static_cast<std::uint32_t>(n) ||
        hello.peers_fingerprint != fingerprint || !tokens_equal(hello.token, opt.token) ||
        hello.model_size != opt.model_size ||
        hello.layout_fingerprint != opt.layout.fingerprint()) {
        {
            std::lock_guard lock(mu);
            ++stats.refused;
        }
        log::error(
            "{} refused a rejoin from {}: not a member of this job (job id, peer list, "
            "token, model or layout differ)",
            name(opt.rank), conn->remote());
        refuse_rejoin(*conn, Reason::job_mismatch, "not a member of this job");
        co_return;
    }
    if (!started || r < 0 || r >= n || r == opt.rank) {
        refuse_rejoin(*conn, Reason::not_rendezvous,
                      fmt::format("{} cannot take a rejoin from rank {} now", name(opt.rank), r));
        co_return;
    }
    const auto index = static_cast<std::size_t>(r);
    if (gone[index] || !view.contains(r)) {
        refuse_rejoin(*conn, Reason::not_member,
                      fmt::format("{} is no longer a member of the job: {} declared it lost",
                                  name(r), name(opt.rank)));
        co_return;
    }
    if (!is_coord()) {
        refuse_rejoin(*conn, Reason::not_coordinator,
                      fmt::format("{} still follows {}", name(opt.rank), name(coord)));
        co_return;
    }
    if (members[index]) members[index]->close();  // a follower's earlier try, now stale
    members[index] = conn;
    conn->last_heard = Clock::now();
    awaited[index] = {};
    conn->send(wire::frame(wire::Kind::welcome));
    send_view(r, wire::Kind::view_install, view);
    if (proposal && proposal->contains(r)) send_view(r, wire::Kind::view_propose, *proposal);
    log::write(
        coord_left ? log::Level::debug : log::Level::info,
        fmt::format("{}: {} follows this peer as the job's coordinator", name(opt.rank), name(r)));
    co_await watch(conn, r);
}

void Bootstrap::Impl::expel_excluded(const View& installed) {
    for (int r = 0; r < n; ++r) {
        auto& e = expel_later[static_cast<std::size_t>(r)];
        if (!e || installed.contains(r)) continue;
        // A stopped peer reads this when it resumes.
        if (!silenced) {
            wire::Notice why{static_cast<std::uint32_t>(r), {}, e->line};
            e->conn->send(wire::frame(wire::Kind::expelled, wire::encode(why)));
        }
        e->conn->close_after_flush();
        e.reset();
    }
}

}  // namespace gossamer::bootstrap
