// After the barrier: heartbeats on the connections to the coordinator (a star; rank 0 until it is
// lost, succession.cpp), silence and resets noticed as losses, and the coordinator forwarding
// every loss to the peers still there.
#include <fmt/format.h>

#include "gossamer/core/log.hpp"
#include "impl.hpp"

namespace gossamer::bootstrap {

void Bootstrap::Impl::install_first_view() {
    std::lock_guard lock(mu);
    view.number = 0;
    view.members.clear();
    for (int r = 0; r < n; ++r) view.members.push_back(r);
}

void Bootstrap::Impl::absent_from_start(const std::vector<Blob>& blobs_now) {
    std::vector<PeerLoss> absent;
    for (int q = 0; q < n; ++q)
        if (q != opt.rank && blobs_now[static_cast<std::size_t>(q)].empty())
            absent.push_back({q,
                              fmt::format("{} did not join within {}: the job started without it "
                                          "(it may enter later with --join)",
                                          name(q), seconds(opt.join_timeout)),
                              false});
    record_absent(absent);
}

void Bootstrap::Impl::record_absent(const std::vector<PeerLoss>& absent) {
    if (absent.empty()) return;
    for (const auto& l : absent) gone[static_cast<std::size_t>(l.rank)] = true;
    std::function<void(const PeerLoss&)> callback;
    {
        std::lock_guard lock(mu);
        std::erase_if(view.members, [&](int r) { return gone[static_cast<std::size_t>(r)]; });
        losses.insert(losses.end(), absent.begin(), absent.end());
        callback = on_lost;
    }
    for (const auto& l : absent) {
        log::info("{}: {}", name(opt.rank), l.reason);
        if (callback) callback(l);
    }
}

void Bootstrap::Impl::start_heartbeats() {
    auto now = Clock::now();
    for (auto& m : members)
        if (m) m->last_heard = now;
    last_beat = Clock::time_point{};
    last_tick = now;
    beat();
}

void Bootstrap::Impl::beat() {
    if (stopping) return;
    auto now = Clock::now();
    // This thread wakes at least once a heartbeat interval. A longer gap means this process (or
    // its host) was stopped: the others' silence over the gap is this peer's own, so it judges
    // nobody by it and gives every peer a fresh timeout (a peer really gone is noticed one
    // timeout later, or at once by its reset connection). docs/modules/bootstrap.md, "Views".
    if (now - last_tick > opt.heartbeat_timeout - opt.heartbeat_interval) {
        log::info(
            "{}: this peer's bootstrap thread did not run for {:.1f} s (the process was "
            "stopped?); not judging the others' silence over that gap",
            name(opt.rank), std::chrono::duration<double>(now - last_tick).count());
        for (auto& m : members)
            if (m) m->last_heard = std::max(m->last_heard, now);
    }
    last_tick = now;
    bool send = !silenced && now - last_beat >= opt.heartbeat_interval;
    if (send) last_beat = now;
    // The timer wakes at the next heartbeat to send or the first moment a peer's silence
    // reaches heartbeat_timeout, whichever comes first: a silent peer is noticed on time.
    auto next = silenced ? Clock::time_point::max() : last_beat + opt.heartbeat_interval;
    for (int r = 0; r < n; ++r) {
        const auto i = static_cast<std::size_t>(r);
        auto& m = members[i];
        if (!m && is_coord() && !gone[i] && awaited[i] != Clock::time_point{}) {
            // A member that has not followed this new coordinator yet (succession.cpp). After
            // the old one's goodbye it most likely finished too (its own goodbye went to the
            // old coordinator alone): counted as having left, and the line says so, as
            // follow() does (logs are searched for "vanished").
            if (now >= awaited[i]) {
                awaited[i] = {};
                lose(r,
                     fmt::format("{} {}: it did not follow {}, the job's new coordinator, "
                                 "within {}{}",
                                 name(r), coord_left ? "is gone" : "vanished", name(opt.rank),
                                 seconds(std::chrono::duration_cast<Millis>(
                                     opt.heartbeat_timeout + 2 * opt.heartbeat_interval +
                                     2 * opt.io_timeout)),
                                 coord_left ? " (after the coordinator's goodbye: counted as "
                                              "having left the job, as at its end)"
                                            : ""),
                     true, coord_left);
                continue;
            }
            next = std::min(next, awaited[i]);
        }
        if (!m || gone[i]) continue;
        if (now - m->last_heard >= opt.heartbeat_timeout) {
            lose(r,
                 fmt::format("{} vanished: no heartbeat for {}", name(r),
                             seconds(opt.heartbeat_timeout)),
                 true);
            continue;
        }
        next = std::min(next, m->last_heard + opt.heartbeat_timeout);
        if (send) m->send(wire::frame(wire::Kind::heartbeat));
    }
    if (next == Clock::time_point::max()) next = now + opt.heartbeat_timeout;
    heartbeat_timer.expires_at(std::max(next, now + Millis(1)));
    heartbeat_timer.async_wait([this](boost::system::error_code ec) {
        if (!ec) beat();
    });
}

asio::awaitable<void> Bootstrap::Impl::watch(std::shared_ptr<Connection> conn, int rank,
                                             std::vector<Frame> early) {
    auto index = static_cast<std::size_t>(rank);
    for (std::size_t next = 0;;) {
        Frame f;
        std::string why;
        try {
            if (next < early.size())
                f = std::move(early[next++]);
            else
                f = co_await conn->read();
        } catch (const wire::Malformed& e) {
            why = std::string("it sent a malformed frame (") + e.what() + ")";
        } catch (const boost::system::system_error& e) {
            // After the barrier a peer closes only with a goodbye: a connection that ends
            // without one is a process that went away (its sockets closed by the kernel).
            why = fmt::format(
                "connection lost ({}) without a goodbye: its process went away (exited, "
                "crashed or was killed)",
                e.code().message());
        }
        if (!why.empty()) {
            conn->close();
            if (stopping || gone[index]) co_return;
            if (!started) {
                // Before the barrier a peer may leave and come back (a restarted process).
                if (members[index] == conn) {
                    members[index].reset();
                    joined[index] = false;
                    log::warn(
                        "{}: {} left before the start-up barrier: {}; waiting for it to "
                        "join again",
                        name(opt.rank), name(rank), why);
                }
                co_return;
            }
            lose(rank, fmt::format("{} vanished: {}", name(rank), why), true);
            co_return;
        }
        conn->last_heard = Clock::now();
        switch (f.header.kind) {
            case wire::Kind::heartbeat:
                break;
            case wire::Kind::bye:
                if (!started) break;
                lose(rank, fmt::format("{} left the job (it closed its bootstrap)", name(rank)),
                     true, true);
                conn->close();
                co_return;
            case wire::Kind::peer_gone:
                if (!is_coord()) {
                    try {
                        auto notice = wire::decode_notice(f.body);
                        if (notice.code < static_cast<std::uint32_t>(n))
                            lose(static_cast<int>(notice.code), notice.text, false,
                                 !notice.ranks.empty());
                    } catch (const wire::Malformed& e) {
                        log::warn("{}: a malformed loss notice from {}: {}", name(opt.rank),
                                  name(rank), e.what());
                    }
                }
                break;
            case wire::Kind::table:
                if (!is_coord() && started) on_table_update(f);
                break;
            case wire::Kind::peer_joined:
                if (!is_coord()) on_peer_joined(f);
                break;
            case wire::Kind::readmitted:
                if (is_coord()) {
                    try {
                        const auto notice = wire::decode_notice(f.body);
                        on_readmitted(rank, static_cast<int>(notice.code));
                    } catch (const wire::Malformed& e) {
                        log::warn("{}: a malformed readmission from {}: {}", name(opt.rank),
                                  name(rank), e.what());
                    }
                }
                break;
            case wire::Kind::view_propose:
            case wire::Kind::view_install:
            case wire::Kind::expelled:
                if (!is_coord()) on_view_frame(f);
                break;
            case wire::Kind::view_ack:
                if (is_coord()) {
                    try {
                        on_view_ack(rank, wire::decode_notice(f.body));
                    } catch (const wire::Malformed& e) {
                        log::warn("{}: a malformed view acknowledgement from {}: {}",
                                  name(opt.rank), name(rank), e.what());
                    }
                }
                break;
            case wire::Kind::view_query:
                if (is_coord()) answer_query(rank);
                break;
            case wire::Kind::suspect:
                if (is_coord()) on_suspect(rank, f);
                break;
            case wire::Kind::clock_query:
                // Answered at once, on this thread: the round trip stays short.
                if (opt.rank == 0) {
                    try {
                        auto q = wire::decode_clock(f.body);
                        conn->send(wire::frame(wire::Kind::clock_reply,
                                               wire::encode(wire::ClockReading{q.seq, unix_us()})));
                    } catch (const wire::Malformed& e) {
                        log::warn("{}: a malformed clock query from {}: {}", name(opt.rank),
                                  name(rank), e.what());
                    }
                }
                break;
            default:
                log::warn("{}: ignored a frame of kind {} from {}", name(opt.rank),
                          static_cast<int>(f.header.kind), name(rank));
        }
    }
}

void Bootstrap::Impl::lose(int rank, const std::string& line, bool forward, bool left) {
    auto index = static_cast<std::size_t>(rank);
    if (gone[index] || rank == opt.rank) return;
    gone[index] = true;
    awaited[index] = {};
    const bool was_coord = rank == coord;
    if (members[index]) {
        // The coordinator tells a peer it declared vanished (a stopped one reads this when it
        // resumes) once a view without it is installed (expel_excluded), and closes then; the
        // others close at once.
        if (is_coord() && !left && !silenced) {
            expel_later[index] = Expel{members[index], line};
            members[index].reset();
        } else {
            members[index]->close();
        }
    }
    std::string text = line;
    if (was_coord) text += "; the lowest live rank takes over as the job's coordinator";
    // A goodbye is the normal end of a job: worth a line, not a warning.
    log::write(left ? log::Level::info : log::Level::warn,
               fmt::format("{}: {}", name(opt.rank), text));
    std::function<void(const PeerLoss&)> callback;
    PeerLoss loss{rank, text, left};
    {
        std::lock_guard lock(mu);
        losses.push_back(loss);
        callback = on_lost;
        if (was_coord) root_lost = true;
    }
    cv.notify_all();
    if (callback) callback(loss);
    if (is_coord()) propose_view(left);
    if (was_coord) {
        coord_left = left;
        succeed();
        return;
    }
    if (!forward || !is_coord() || silenced) return;  // a hung coordinator forwards nothing
    // A notice about a goodbye lists the rank that left; one about a vanished peer lists none.
    std::vector<std::uint32_t> left_ranks;
    if (left) left_ranks.push_back(static_cast<std::uint32_t>(rank));
    auto notice =
        wire::frame(wire::Kind::peer_gone,
                    wire::encode(wire::Notice{static_cast<std::uint32_t>(rank), left_ranks, line}));
    // A coordinator that heard from no other member for two intervals is likely the one cut
    // off (its own link down: every timer runs out at once): its verdict waits for a majority
    // to confirm it with a view (chaos run, seed 2 jobs 5 and 21: an isolated rank 0 relayed
    // healthy peers as lost, and the all-reduce stopped naming them).
    if (!left) {
        const auto now = Clock::now();
        bool fresh = false;
        for (int r = 0; r < n && !fresh; ++r) {
            const auto& m = members[static_cast<std::size_t>(r)];
            fresh = r != opt.rank && m && !gone[static_cast<std::size_t>(r)] &&
                    now - m->last_heard <= 2 * opt.heartbeat_interval;
        }
        if (!fresh) {
            log::debug(
                "{}: hears from no other member; the loss of {} is relayed once a view "
                "without it is installed",
                name(opt.rank), name(rank));
            held_relays.emplace_back(rank, std::move(notice));
            return;
        }
    }
    for (int r = 0; r < n; ++r) {
        auto& m = members[static_cast<std::size_t>(r)];
        if (r != opt.rank && m && !gone[static_cast<std::size_t>(r)]) m->send(notice);
    }
}

}  // namespace gossamer::bootstrap
