// Joining a running job (docs/modules/bootstrap.md, "Joining a running job"): a peer started after
// the barrier (a late one, or one restarted after a crash) sends `join` to the coordinator, which
// checks it like a hello, sends it the table, and proposes the view with it. Once that view is
// installed (a majority of the previous view acknowledged it) every member gets the new table
// and a peer_joined notice, and the joiner's Bootstrap::join returns. Bootstrap thread, except
// the public functions at the end.
#include <fmt/format.h>

#include <algorithm>

#include "gossamer/core/log.hpp"
#include "impl.hpp"

namespace gossamer::bootstrap {

asio::awaitable<void> Bootstrap::Impl::serve_join(std::shared_ptr<Connection> conn,
                                                  wire::Hello hello) {
    const int r = static_cast<int>(hello.rank);
    if (!started) {
        refuse(*conn, r,
               {static_cast<std::uint32_t>(Reason::late_join),
                {},
                fmt::format("the job has not passed its start-up barrier yet; start rank {} "
                            "without --join to take part from the start",
                            hello.rank)});
        co_return;
    }
    if (!is_coord()) {
        refuse_rejoin(
            *conn, Reason::not_coordinator,
            fmt::format("{} is not the job's coordinator; {} is", name(opt.rank), name(coord)));
        co_return;
    }
    if (auto problem = check(hello, true)) {
        refuse(*conn, r, std::move(*problem));
        co_return;
    }
    const auto index = static_cast<std::size_t>(r);
    if (members[index]) members[index]->close();
    members[index] = conn;
    gone[index] = false;
    ++incarnation[index];  // reports about its earlier process no longer concern it
    awaited[index] = {};
    if (expel_later[index]) expel_later[index]->conn->close();  // the crashed process's
    expel_later[index].reset();
    if (count_only) opt.peers[index] = hello.listen;
    std::vector<Blob> now;
    {
        std::lock_guard lock(mu);
        table[index] = std::move(hello.address);
        known_peers = opt.peers;
        now = table;
    }
    if (std::find(admitted.begin(), admitted.end(), r) == admitted.end()) admitted.push_back(r);
    conn->last_heard = Clock::now();
    conn->send(wire::frame(wire::Kind::welcome));
    conn->send(wire::frame(wire::Kind::table, wire::encode_table(now, opt.peers)));
    log::info("{}: {} joins the running job from {}", name(opt.rank), name(r), conn->remote());
    propose_view(false);
    co_await watch(conn, r);
}

void Bootstrap::Impl::announce_joins(const View& installed) {
    std::vector<int> added;
    std::erase_if(admitted, [&](int r) {
        if (gone[static_cast<std::size_t>(r)]) return true;
        if (!installed.contains(r)) return false;
        added.push_back(r);
        return true;
    });
    if (added.empty()) return;
    std::vector<Blob> now;
    {
        std::lock_guard lock(mu);
        now = table;
    }
    const auto table_frame = wire::frame(wire::Kind::table, wire::encode_table(now, opt.peers));
    for (int r : added) {
        // The joiner's own view waits until the members' transports readmitted it.
        auto& waiting = readmitting[r];
        waiting.clear();
        for (int q : installed.members)
            if (q != r) waiting.push_back(q);
        auto timer = std::make_shared<asio::steady_timer>(io);
        // Within half a heartbeat timeout: the joiner sends no heartbeat before its view.
        const auto limit = std::min(opt.io_timeout, opt.heartbeat_timeout / 2);
        timer->expires_after(limit);
        timer->async_wait([this, timer, r, limit](boost::system::error_code ec) {
            if (!ec && readmitting.contains(r)) {
                log::debug("{}: not every member readmitted {} within {}; releasing its view",
                           name(opt.rank), name(r), seconds(limit));
                release_install(r);
            }
        });
        const auto line =
            fmt::format("{} joined the running job (view {})", name(r), installed.number);
        const auto notice =
            wire::frame(wire::Kind::peer_joined,
                        wire::encode(wire::Notice{static_cast<std::uint32_t>(r), {}, line}));
        for (int q : installed.members) {
            auto& m = members[static_cast<std::size_t>(q)];
            if (q == opt.rank || q == r || !m) continue;
            m->send(table_frame);
            m->send(notice);
        }
        log::info("{}: {}", name(opt.rank), line);
        joined_callback(r);
    }
}

void Bootstrap::Impl::on_readmitted(int member, int rank) {
    auto it = readmitting.find(rank);
    if (it == readmitting.end()) return;
    std::erase(it->second, member);
    if (it->second.empty()) release_install(rank);
}

void Bootstrap::Impl::release_install(int rank) {
    if (readmitting.erase(rank) == 0) return;  // released already
    View v;
    {
        std::lock_guard lock(mu);
        v = view;  // the newest: a later install may have come meanwhile
    }
    if (v.contains(rank)) send_view(rank, wire::Kind::view_install, v);
}

void Bootstrap::Impl::on_table_update(const Frame& f) {
    try {
        auto t = wire::decode_full_table(f.body, static_cast<std::uint32_t>(n));
        for (int q = 0; q < n; ++q) {
            const auto& e = t.endpoints[static_cast<std::size_t>(q)];
            if (q != opt.rank && !e.host.empty() && e.port > 0)
                opt.peers[static_cast<std::size_t>(q)] = e;
        }
        std::lock_guard lock(mu);
        table = std::move(t.blobs);
        known_peers = opt.peers;
    } catch (const wire::Malformed& e) {
        log::warn("{}: a malformed table from {}: {}", name(opt.rank), name(coord), e.what());
    }
}

void Bootstrap::Impl::on_peer_joined(const Frame& f) {
    wire::Notice notice;
    try {
        notice = wire::decode_notice(f.body);
        if (notice.code >= static_cast<std::uint32_t>(n))
            throw wire::Malformed(fmt::format("rank {} of {} peers", notice.code, n));
    } catch (const wire::Malformed& e) {
        log::warn("{}: a malformed join notice from {}: {}", name(opt.rank), name(coord), e.what());
        return;
    }
    const int r = static_cast<int>(notice.code);
    if (r == opt.rank) return;
    const auto index = static_cast<std::size_t>(r);
    gone[index] = false;
    // A connection to its earlier process (kept from when it was this peer's coordinator) is
    // dead: with the rank a member again, beat() would judge it by that connection's silence.
    if (r != coord && members[index]) {
        members[index]->close();
        members[index].reset();
    }
    log::info("{}: {}", name(opt.rank), notice.text);
    joined_callback(r);
}

void Bootstrap::Impl::joined_callback(int rank) {
    std::function<void(int, const Blob&)> callback;
    Blob blob;
    {
        std::lock_guard lock(mu);
        joins.push_back(rank);
        // Back in the job: its earlier loss no longer counts (lost_peers() is who is out).
        std::erase_if(losses, [rank](const PeerLoss& l) { return l.rank == rank; });
        callback = on_joined;
        blob = table[static_cast<std::size_t>(rank)];
    }
    cv.notify_all();
    if (callback) callback(rank, blob);
}

asio::awaitable<void> Bootstrap::Impl::join_running(Blob address) {
    const auto deadline = Clock::now() + opt.join_timeout;
    const auto hello_frame =
        wire::frame(wire::Kind::join, wire::encode(own_hello(std::move(address), self)));
    // Rank 0 first (the rendezvous); once it is gone, the coordinator is another rank: a peer
    // that knows the others' addresses asks each in turn (a count-only peer knows only rank 0).
    std::vector<int> candidates;
    for (int q = 0; q < n; ++q)
        if (q != opt.rank && opt.peers[static_cast<std::size_t>(q)].port > 0)
            candidates.push_back(q);
    std::shared_ptr<Connection> conn;
    int c = -1;
    std::string last = "no attempt";
    while (!conn) {
        for (int q : candidates) {
            auto answer = co_await ask(q, hello_frame, deadline);
            if (stopping) co_return;
            if (answer.conn) {
                conn = answer.conn;
                c = q;
                break;
            }
            if (!answer.refusal) {
                last = fmt::format("{}: {}", name(q), answer.error);
                continue;
            }
            const auto reason = static_cast<Reason>(answer.refusal->code);
            if (reason == Reason::not_coordinator) {
                last = answer.refusal->text;
                continue;
            }
            fail(BootstrapError(reason, {q},
                                fmt::format("{} was refused by {}: {}", name(opt.rank), name(q),
                                            answer.refusal->text)));
            co_return;
        }
        if (conn) break;
        if (Clock::now() + opt.retry_interval >= deadline) {
            fail(BootstrapError(
                Reason::unreachable, {0},
                fmt::format("{}: no running job to join: none of the {} other peers of the "
                            "topology answered as its coordinator within {} (last: {}); start "
                            "the job first, or start this peer without --join",
                            name(opt.rank), candidates.size(), seconds(opt.join_timeout), last)));
            co_return;
        }
        asio::steady_timer pause(io, opt.retry_interval);
        boost::system::error_code ec;
        co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    {
        std::lock_guard lock(mu);
        coord = c;
    }
    members[static_cast<std::size_t>(c)] = conn;
    // The table, then the view that holds this peer; whatever else comes first is watch()'s.
    std::optional<wire::Table> t;
    std::vector<Frame> early;
    for (;;) {
        Frame f;
        try {
            f = co_await conn->read(deadline + opt.io_timeout);
        } catch (const std::exception& e) {
            if (stopping) co_return;
            fail(BootstrapError(Reason::connection_lost, {c},
                                fmt::format("{}: {} admitted this peer but the view with it was "
                                            "not installed: {}; check {}'s log",
                                            name(opt.rank), name(c), e.what(), name(c))));
            co_return;
        }
        if (f.header.kind == wire::Kind::table && !t) {
            try {
                t = wire::decode_full_table(f.body, static_cast<std::uint32_t>(n));
            } catch (const wire::Malformed& e) {
                fail(BootstrapError(Reason::malformed, {c},
                                    fmt::format("{}: {} sent a malformed table: {}", name(opt.rank),
                                                name(c), e.what())));
                co_return;
            }
            continue;
        }
        if (f.header.kind == wire::Kind::view_propose) {
            on_view_frame(f);  // acknowledged: harmless, and the coordinator counts only voters
            continue;
        }
        if (f.header.kind == wire::Kind::view_install) {
            on_view_frame(f);
            std::lock_guard lock(mu);
            if (view.contains(opt.rank) && t) break;
            continue;
        }
        if (f.header.kind != wire::Kind::heartbeat) early.push_back(std::move(f));
    }
    for (int q = 0; q < n; ++q) {
        const auto& e = t->endpoints[static_cast<std::size_t>(q)];
        if (q != opt.rank && !e.host.empty() && e.port > 0)
            opt.peers[static_cast<std::size_t>(q)] = e;
    }
    // Ranks outside the view the peer joined were lost before it came: losses for it, too.
    const View v = [&] {
        std::lock_guard lock(mu);
        return view;
    }();
    started = true;
    std::vector<PeerLoss> before;
    for (int q = 0; q < n; ++q)
        if (q != opt.rank && !v.contains(q))
            before.push_back({q,
                              fmt::format("{} is not in the job's view {} (lost before this peer "
                                          "joined)",
                                          name(q), v.number),
                              false});
    record_absent(before);
    log::info("{}: joined the running job through {} (view {}: ranks {})", name(opt.rank), name(c),
              v.number, fmt::join(v.members, ", "));
    finish(std::move(t->blobs));
    start_heartbeats();
    co_await watch(conn, c, std::move(early));
}

std::vector<Blob> Bootstrap::join(std::span<const std::byte> address) {
    return impl_->enter(address, true);
}

void Bootstrap::on_peer_joined(std::function<void(int, const Blob&)> callback) {
    std::lock_guard lock(impl_->mu);
    impl_->on_joined = std::move(callback);
}

void Bootstrap::readmitted(int rank) {
    asio::post(impl_->io, [impl = impl_.get(), rank] {
        if (impl->stopping || rank < 0 || rank >= impl->n) return;
        if (impl->is_coord()) {
            impl->on_readmitted(impl->opt.rank, rank);
            return;
        }
        auto& c = impl->members[static_cast<std::size_t>(impl->coord)];
        if (c)
            c->send(wire::frame(
                wire::Kind::readmitted,
                wire::encode(wire::Notice{static_cast<std::uint32_t>(rank), {}, std::string()})));
    });
}

std::vector<int> Bootstrap::joined_peers() const {
    std::lock_guard lock(impl_->mu);
    return impl_->joins;
}

}  // namespace gossamer::bootstrap
