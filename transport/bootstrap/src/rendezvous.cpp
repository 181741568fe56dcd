// The start-up: rank 0 checks every handshake and releases all peers with the table of address
// blobs once all n have joined (the barrier); the others retry reaching rank 0 until their
// join_timeout, then wait for the table.
#include <fmt/format.h>

#include <algorithm>

#include "gossamer/bootstrap/environment.hpp"
#include "gossamer/core/log.hpp"
#include "impl.hpp"

namespace gossamer::bootstrap {
namespace {

std::string list_ranks(const std::vector<std::string>& names) {
    constexpr std::size_t kShown = 8;
    std::string out;
    std::size_t shown = std::min(names.size(), kShown);
    for (std::size_t i = 0; i < shown; ++i) {
        if (i > 0) out += (i + 1 == shown && names.size() <= kShown) ? " and " : ", ";
        out += names[i];
    }
    if (names.size() > kShown) out += fmt::format(" and {} more", names.size() - kShown);
    return out;
}

bool is_wildcard(const std::string& host) {
    return host == "0.0.0.0" || host == "::";
}

}  // namespace

void Bootstrap::Impl::refuse(Connection& conn, int rank, wire::Notice notice) {
    {
        std::lock_guard lock(mu);
        ++stats.refused;
    }
    std::string who = rank >= 0 ? fmt::format("rank {}", rank) : std::string("a peer");
    log::error("{} refused {} (from {}): {}", name(opt.rank), who, conn.remote(), notice.text);
    // Kept for the start-up barrier's verdict: a rank that was refused did not merely fail to
    // show up. Only a rank this peer can name, and not an impostor claiming a joined rank.
    if (opt.rank == 0 && rank > 0 && rank < n && !joined[static_cast<std::size_t>(rank)] &&
        notice.code != static_cast<std::uint32_t>(Reason::duplicate_rank))
        refusals[static_cast<std::size_t>(rank)] = fmt::format(
            "{}'s handshake was refused (from {}): {}", name(rank), conn.remote(), notice.text);
    conn.send(wire::frame(wire::Kind::refuse, wire::encode(notice)));
    conn.close_after_flush();
}

std::optional<wire::Notice> Bootstrap::Impl::check(const wire::Hello& h, bool joining) const {
    auto no = [](Reason r, std::string text) {
        return wire::Notice{static_cast<std::uint32_t>(r), {}, std::move(text)};
    };
    int r = static_cast<int>(h.rank);
    if (h.job_id != opt.job_id)
        return no(Reason::job_mismatch,
                  fmt::format("job ids differ: rank {} is in job {}, rank 0 in job {}; give "
                              "every peer of one job the same job id (--job-id or "
                              "GOSSAMER_JOB_ID) and separate jobs separate ports",
                              h.rank, h.job_id, opt.job_id));
    auto mine = fingerprint;
    if (h.n != static_cast<std::uint32_t>(n) || h.peers_fingerprint != mine) {
        // A count-only list has one fingerprint per size: say so rather than show a number.
        auto kind = [](std::uint32_t count, std::uint64_t print) {
            return count > 1 && print == wire::count_only_fingerprint(count)
                       ? std::string("count-only, addresses from the rendezvous")
                       : fmt::format("hosts and ports fingerprint {:016x}", print);
        };
        return no(Reason::peer_list_mismatch,
                  fmt::format("peer lists of the topology differ: rank {} has {} peers ({}), "
                              "rank 0 has {} ({}); start every peer with the same topology file",
                              h.rank, h.n, kind(h.n, h.peers_fingerprint), n,
                              kind(static_cast<std::uint32_t>(n), mine)));
    }
    // Rank 0 is the rendezvous: a hello claiming it is a second process; a join may claim it
    // (rank 0 restarted after its successor took over as the coordinator).
    if (r < 0 || r >= n || r == opt.rank || (r == 0 && !joining))
        return no(Reason::duplicate_rank,
                  fmt::format("a second process claims rank {}; every rank must be started once",
                              h.rank));
    if (!tokens_equal(h.token, opt.token))
        return no(Reason::wrong_token,
                  fmt::format("rank {}'s job token does not match rank 0's; give every peer the "
                              "same {} or token file",
                              h.rank, kTokenVariable));
    if (h.model_size != opt.model_size)
        return no(Reason::model_size_mismatch,
                  fmt::format("model sizes differ: rank {} has {} parameters, rank 0 has {}; "
                              "start every peer with the same model",
                              h.rank, h.model_size, opt.model_size));
    if (h.layout_fingerprint != opt.layout.fingerprint())
        return no(Reason::layout_mismatch,
                  fmt::format("partition layouts differ: rank {} has '{}' (fingerprint {:016x}), "
                              "rank 0 has '{}' ({:016x}); give every peer the same model and "
                              "partition config",
                              h.rank, h.layout_text, h.layout_fingerprint, opt.layout.describe(),
                              opt.layout.fingerprint()));
    // Token first: only a peer of this job learns rank 0's settings from a refusal.
    if (auto m = compare_settings(h.settings, opt.settings))
        return no(Reason::setting_mismatch, mismatch_text(*m, r, opt.rank));
    auto& current = members[static_cast<std::size_t>(r)];
    if (joining) {
        if (view.contains(r) && !gone[static_cast<std::size_t>(r)])
            return no(Reason::duplicate_rank,
                      fmt::format("rank {} is still a member of the running job (view {}); "
                                  "join with a rank that left or was lost, or stop the other "
                                  "process first",
                                  h.rank, view.number));
        return std::nullopt;
    }
    if (started)
        return no(Reason::late_join,
                  fmt::format("rank {} tried to join after the start-up barrier; start it with "
                              "--join to enter the running job",
                              h.rank));
    if (joined[static_cast<std::size_t>(r)] && current && current->is_open())
        return no(Reason::duplicate_rank,
                  fmt::format("rank {} has already joined from {}; two processes were started "
                              "with rank {}",
                              h.rank, current->remote(), h.rank));
    return std::nullopt;
}

asio::awaitable<void> Bootstrap::Impl::serve(std::shared_ptr<Connection> conn) {
    Frame f;
    try {
        f = co_await conn->read(Clock::now() + opt.io_timeout, wire::kMaxHello);
        conn->pending = false;
    } catch (const wire::Malformed& e) {
        conn->pending = false;
        refuse_garbage(*conn, e.what());
        co_return;
    } catch (const boost::system::system_error& e) {
        conn->pending = false;
        if (stopping || conn->evicted) co_return;
        refuse_garbage(*conn,
                       e.code() == asio::error::timed_out
                           ? "sent no complete handshake within " + seconds(opt.io_timeout)
                           : "closed before a complete handshake (" + e.code().message() + ")");
        co_return;
    }
    if (f.header.version != wire::kVersion) {
        refuse(*conn, -1,
               {static_cast<std::uint32_t>(Reason::version_mismatch),
                {},
                fmt::format("protocol versions differ: the peer speaks bootstrap version {}, "
                            "rank {} speaks version {}; run the same Gossamer release on every "
                            "node",
                            f.header.version, opt.rank, wire::kVersion)});
        co_return;
    }
    if (f.header.kind != wire::Kind::hello && f.header.kind != wire::Kind::rejoin &&
        f.header.kind != wire::Kind::join) {
        refuse_garbage(*conn, fmt::format("sent a frame of kind {} before its handshake",
                                          static_cast<int>(f.header.kind)));
        co_return;
    }
    wire::Hello hello;
    try {
        hello = wire::decode_hello(f.body);
    } catch (const wire::Malformed& e) {
        refuse_garbage(*conn, std::string("a malformed handshake: ") + e.what());
        co_return;
    }
    if (f.header.kind == wire::Kind::rejoin) {
        co_await serve_rejoin(conn, std::move(hello));
        co_return;
    }
    if (f.header.kind == wire::Kind::join) {
        co_await serve_join(conn, std::move(hello));
        co_return;
    }
    int r = static_cast<int>(hello.rank);
    if (opt.rank != 0) {
        refuse(*conn, r,
               {static_cast<std::uint32_t>(Reason::not_rendezvous),
                {},
                fmt::format("{} is not the rendezvous; peers join rank 0 ({})", name(opt.rank),
                            opt.peers[0].str())});
        co_return;
    }
    if (auto problem = check(hello)) {
        refuse(*conn, r, std::move(*problem));
        co_return;
    }
    auto index = static_cast<std::size_t>(r);
    if (count_only) {
        // Only a rank that passed every check gets a name: the table carries it to all.
        if (hello.listen.host.empty() || hello.listen.port <= 0) {
            refuse_garbage(
                *conn, fmt::format("rank {} sent no listen address in its handshake", hello.rank));
            co_return;
        }
        opt.peers[index] = hello.listen;
        // Listening on every interface, rank 0 names itself by the address the first peer
        // reached it at.
        if (is_wildcard(opt.peers[0].host) && !conn->local_address().empty())
            opt.peers[0].host = conn->local_address();
    }
    members[index] = conn;
    blobs[index] = std::move(hello.address);
    joined[index] = true;
    refusals[index].clear();
    conn->send(wire::frame(wire::Kind::welcome));
    auto count = static_cast<int>(std::count(joined.begin(), joined.end(), true)) + 1;
    log::info("{}: {} joined from {} ({} of {} peers)", name(0), name(r), conn->remote(), count, n);
    maybe_release();
    co_await watch(conn, r);
}

void Bootstrap::Impl::start_as_root(Blob address) {
    blobs[0] = std::move(address);
    own_blob_set = true;
    join_timer.expires_after(opt.join_timeout);
    join_timer.async_wait([this](boost::system::error_code ec) {
        if (!ec && !started && !stopping) give_up_join();
    });
    maybe_release();
}

void Bootstrap::Impl::maybe_release() {
    if (!own_blob_set || started || stopping) return;
    const auto late = [this](int r) {
        return opt.min_peers > 0 &&
               std::find(opt.late.begin(), opt.late.end(), r) != opt.late.end();
    };
    int present = 1;
    for (int r = 1; r < n; ++r) {
        if (joined[static_cast<std::size_t>(r)])
            ++present;
        else if (!late(r))
            return;
    }
    if (present < n) {  // the others join later (Options::late)
        if (present < opt.min_peers) return;
        log::info(
            "{}: the {} peers due at the start joined; start-up barrier passed (the "
            "others join later)",
            name(0), present);
    } else {
        log::info("{}: all {} peer{} joined; start-up barrier passed", name(0), n,
                  n == 1 ? "" : "s");
    }
    release();
}

void Bootstrap::Impl::release() {
    started = true;
    join_timer.cancel();
    auto table_frame = wire::frame(wire::Kind::table, wire::encode_table(blobs, opt.peers));
    for (int r = 1; r < n; ++r)
        if (joined[static_cast<std::size_t>(r)])
            members[static_cast<std::size_t>(r)]->send(table_frame);
    // View 0 before the caller of rendezvous() wakes: it may ask for the view at once.
    install_first_view();
    absent_from_start(blobs);  // ranks that did not join (min_peers): no blob
    finish(blobs);
    start_heartbeats();
}

void Bootstrap::Impl::give_up_join() {
    const auto present = static_cast<int>(std::count(joined.begin(), joined.end(), true)) + 1;
    if (opt.min_peers > 0 && present >= opt.min_peers && own_blob_set) {
        // Enough to start: the others are lost from the start and may join later.
        log::info(
            "{}: {} of {} peers joined within {}; starting without the others "
            "(min_peers {})",
            name(0), present, n, seconds(opt.join_timeout), opt.min_peers);
        release();
        return;
    }
    std::vector<int> missing;
    std::vector<std::string> names, refused;
    for (int r = 1; r < n; ++r) {
        const auto i = static_cast<std::size_t>(r);
        if (joined[i]) continue;
        missing.push_back(r);
        if (refusals[i].empty())
            names.push_back(name(r));
        else
            refused.push_back(refusals[i]);
    }
    // A refused rank is named with the field that differed, not sent to the topology file.
    std::vector<std::string> parts;
    if (!names.empty())
        parts.push_back(
            fmt::format("{} did not join within {}; check that {} started with the "
                        "same topology file",
                        list_ranks(names), seconds(opt.join_timeout),
                        names.size() == 1 ? "it was" : "they were"));
    else
        parts.push_back(fmt::format("{} peer{} did not join within {}", refused.size(),
                                    refused.size() == 1 ? "" : "s", seconds(opt.join_timeout)));
    constexpr std::size_t kRefusalsShown = 3;
    for (std::size_t i = 0; i < refused.size() && i < kRefusalsShown; ++i)
        parts.push_back(refused[i]);
    if (refused.size() > kRefusalsShown)
        parts.push_back(fmt::format("{} more refused", refused.size() - kRefusalsShown));
    std::string text;
    for (const auto& p : parts) text += (text.empty() ? "" : "; ") + p;
    wire::Notice notice{static_cast<std::uint32_t>(Reason::missing_peers), {}, text};
    for (int r : missing) notice.ranks.push_back(static_cast<std::uint32_t>(r));
    auto abort_frame = wire::frame(wire::Kind::abort, wire::encode(notice));
    for (auto& m : members) {
        if (!m) continue;
        m->send(abort_frame);
        m->close_after_flush();
    }
    stopping = true;  // the watchers of the aborted connections must not report losses
    fail(BootstrapError(Reason::missing_peers, std::move(missing), name(0) + ": " + text));
}

asio::awaitable<std::pair<std::shared_ptr<Connection>, std::string>> Bootstrap::Impl::connect_once(
    const Endpoint& where, Clock::time_point deadline) {
    tcp::resolver resolver(io);
    boost::system::error_code ec;
    auto found = co_await resolver.async_resolve(where.host, std::to_string(where.port),
                                                 asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return std::pair{nullptr, ec.message()};
    // The timer closes the socket at the limit; `done` stops a late timer handler.
    auto socket = std::make_shared<tcp::socket>(io);
    auto done = std::make_shared<bool>(false);
    asio::steady_timer limit(io);
    limit.expires_at(std::min(deadline, Clock::now() + opt.io_timeout));
    limit.async_wait([socket, done](boost::system::error_code e) {
        boost::system::error_code ignored;
        if (!e && !*done) socket->close(ignored);
    });
    co_await asio::async_connect(*socket, found, asio::redirect_error(asio::use_awaitable, ec));
    *done = true;
    limit.cancel();
    // Linux can connect a socket to itself when nobody listens on a local port of the
    // ephemeral range; that is not the peer.
    boost::system::error_code e1, e2;
    if (!ec && socket->is_open() && socket->local_endpoint(e1) == socket->remote_endpoint(e2)) {
        socket->close(e1);
        ec = asio::error::connection_refused;
    }
    if (!ec && socket->is_open())
        co_return std::pair{std::make_shared<Connection>(std::move(*socket)), std::string()};
    if (!ec) ec = asio::error::timed_out;
    co_return std::pair{nullptr, ec.message()};
}

wire::Hello Bootstrap::Impl::own_hello(Blob address, Endpoint listen) const {
    return {static_cast<std::uint32_t>(opt.rank),
            static_cast<std::uint32_t>(n),
            opt.job_id,
            fingerprint,
            opt.model_size,
            opt.layout.fingerprint(),
            opt.token,
            opt.layout.describe(),
            std::move(address),
            opt.settings,  // encode() leaves each fix out
            std::move(listen)};
}

asio::awaitable<Bootstrap::Impl::Answer> Bootstrap::Impl::ask(int rank, const wire::Bytes& frame,
                                                              Clock::time_point deadline) {
    auto [conn, error] = co_await connect_once(opt.peers[static_cast<std::size_t>(rank)], deadline);
    if (!conn) co_return Answer{nullptr, std::nullopt, "unreachable (" + error + ")"};
    conn->send(frame);
    const Answer stopped{nullptr, std::nullopt, "this peer is stopping"};
    if (stopping) {
        // Connected after shutdown(): the frame and a goodbye, so the other side sees a peer
        // that left (a bare close would be a crash to a coordinator, garbage to a listener).
        conn->send(wire::frame(wire::Kind::bye));
        conn->close_after_flush();
        co_return stopped;
    }
    // Until the answer is read, shutdown() says goodbye on this connection (and owns it then).
    // Unlisted by hand after the read, never by a guard in this frame: a frame still suspended
    // when the io_context is destroyed outlives `asking` (a member declared after `io`).
    asking.push_back(conn);
    Frame f;
    std::string failed;
    try {
        f = co_await conn->read(Clock::now() + opt.io_timeout);
    } catch (const wire::Malformed& e) {
        failed = std::string("it answered with a malformed frame (") + e.what() + ")";
    } catch (const boost::system::system_error& e) {
        failed = e.code() == asio::error::timed_out
                     ? "it did not answer within " + seconds(opt.io_timeout)
                     : "it closed the connection (" + e.code().message() + ")";
    }
    const Connection* self_conn = conn.get();
    std::erase_if(asking, [self_conn](const std::weak_ptr<Connection>& w) {
        auto c = w.lock();
        return !c || c.get() == self_conn;
    });
    // Stopping: shutdown() said goodbye on it while the answer came (closing now could drop it).
    if (stopping) co_return stopped;
    if (!failed.empty()) {
        conn->close();
        co_return Answer{nullptr, std::nullopt, failed};
    }
    if (f.header.kind == wire::Kind::welcome) co_return Answer{conn, std::nullopt, ""};
    conn->close();
    try {
        if (f.header.kind != wire::Kind::refuse)
            throw wire::Malformed(
                fmt::format("a frame of kind {}", static_cast<int>(f.header.kind)));
        co_return Answer{nullptr, wire::decode_notice(f.body), ""};
    } catch (const wire::Malformed& e) {
        co_return Answer{nullptr, std::nullopt, std::string("it answered with ") + e.what()};
    }
}

asio::awaitable<std::shared_ptr<Connection>> Bootstrap::Impl::connect_root(
    Clock::time_point deadline) {
    int attempts = 0;
    std::string last_error = "no attempt";
    for (;;) {
        ++attempts;
        auto [conn, error] = co_await connect_once(opt.peers[0], deadline);
        if (conn) co_return conn;
        last_error = error;
        if (stopping) co_return nullptr;
        if (Clock::now() + opt.retry_interval >= deadline) break;
        asio::steady_timer pause(io, opt.retry_interval);
        boost::system::error_code ec;
        co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    fail(BootstrapError(
        Reason::unreachable, {0},
        fmt::format("{} cannot reach {} after {} attempts within {} (last error: "
                    "{}); check that rank 0 is running with the same topology "
                    "file and that its port is reachable from this host",
                    name(opt.rank), name(0), attempts, seconds(opt.join_timeout), last_error)));
    co_return nullptr;
}

asio::awaitable<void> Bootstrap::Impl::join_root(Blob address) {
    auto conn = co_await connect_root(Clock::now() + opt.join_timeout);
    if (!conn) co_return;
    // The address this peer reports: its bind address, or where it reached rank 0 from when it
    // listens on every interface (the kernel's route to rank 0 picked it: reachable from there).
    Endpoint listen = self;
    if (is_wildcard(listen.host) && !conn->local_address().empty()) {
        listen.host = conn->local_address();
        opt.peers[static_cast<std::size_t>(opt.rank)].host = listen.host;
    }
    conn->send(wire::frame(wire::Kind::hello, wire::encode(own_hello(std::move(address), listen))));
    members[0] = conn;

    auto lost = [&](const std::string& what) {
        fail(BootstrapError(
            Reason::connection_lost, {0},
            fmt::format("{}: {} {}; check rank 0's log", name(opt.rank), name(0), what)));
    };
    // First the answer to the handshake, then clock round trips with rank 0 (one at a time,
    // so none queues behind another) and (after every peer joined) the table, in any order.
    bool welcomed = false;
    const auto wanted = static_cast<std::size_t>(opt.clock_samples);
    std::vector<ClockSample> samples;
    std::int64_t sent_us = 0;
    auto query = [&] {
        sent_us = unix_us();
        const wire::ClockReading q{static_cast<std::uint32_t>(samples.size()), sent_us};
        conn->send(wire::frame(wire::Kind::clock_query, wire::encode(q)));
    };
    std::optional<Frame> table_frame;
    std::vector<Frame> early;  // after the table: what watch() reads first (heartbeats aside)
    while (!table_frame || samples.size() < wanted) {
        Frame f;
        auto wait = welcomed ? opt.join_timeout + opt.io_timeout : opt.io_timeout;
        try {
            f = co_await conn->read(Clock::now() + wait);
        } catch (const wire::Malformed& e) {
            fail(BootstrapError(Reason::malformed, {0},
                                fmt::format("{}: {} answered with bytes that are not the bootstrap "
                                            "protocol ({}); check that the topology file names "
                                            "rank 0's port",
                                            name(opt.rank), name(0), e.what())));
            co_return;
        } catch (const boost::system::system_error& e) {
            if (stopping) co_return;
            if (e.code() == asio::error::timed_out)
                lost(fmt::format("did not answer within {}",
                                 seconds(std::chrono::duration_cast<Millis>(wait))));
            else
                lost(fmt::format("closed the connection during start-up ({})", e.code().message()));
            co_return;
        }
        if (f.header.kind == wire::Kind::welcome && !welcomed) {
            welcomed = true;
            log::info("{}: joined {}; waiting for the other peers", name(opt.rank), name(0));
            query();
            continue;
        }
        if (f.header.kind == wire::Kind::clock_reply && welcomed && samples.size() < wanted) {
            const std::int64_t received_us = unix_us();
            try {
                const auto reply = wire::decode_clock(f.body);
                if (reply.seq != samples.size())
                    throw wire::Malformed(fmt::format("the answer to clock query {} came for {}",
                                                      samples.size(), reply.seq));
                samples.push_back({sent_us, reply.unix_us, received_us});
            } catch (const wire::Malformed& e) {
                lost(std::string("sent a malformed clock reply: ") + e.what());
                co_return;
            }
            if (samples.size() < wanted) query();
            continue;
        }
        if (f.header.kind == wire::Kind::table && welcomed && !table_frame) {
            table_frame = std::move(f);
            continue;
        }
        if (table_frame) {
            // Rank 0 is past the barrier: its heartbeats (start_heartbeats() marks rank 0 heard
            // when this peer starts them) and whatever else it sends are watch()'s.
            if (f.header.kind != wire::Kind::heartbeat) early.push_back(std::move(f));
            continue;
        }
        if (f.header.kind == wire::Kind::refuse || f.header.kind == wire::Kind::abort) {
            try {
                auto notice = wire::decode_notice(f.body);
                std::vector<int> ranks;
                for (auto r : notice.ranks) ranks.push_back(static_cast<int>(r));
                if (ranks.empty()) ranks.push_back(0);
                auto prefix =
                    f.header.kind == wire::Kind::refuse
                        ? fmt::format("{} was refused by {}: ", name(opt.rank), name(0))
                        : fmt::format("{}: the rendezvous at {} failed: ", name(opt.rank), name(0));
                fail(BootstrapError(static_cast<Reason>(notice.code), std::move(ranks),
                                    prefix + notice.text));
            } catch (const wire::Malformed& e) {
                lost(std::string("sent a malformed refusal: ") + e.what());
            }
            co_return;
        }
        lost(fmt::format("sent an unexpected frame of kind {} during start-up",
                         static_cast<int>(f.header.kind)));
        co_return;
    }
    try {
        auto table = wire::decode_full_table(table_frame->body, static_cast<std::uint32_t>(n));
        // Rank 0 keeps the name this peer reached it by; the others are as reported.
        if (count_only)
            for (int q = 1; q < n; ++q) {
                const auto& e = table.endpoints[static_cast<std::size_t>(q)];
                if (table.blobs[static_cast<std::size_t>(q)].empty()) continue;  // absent
                if (e.host.empty() || e.port <= 0)
                    throw wire::Malformed(fmt::format("no address for rank {}", q));
                opt.peers[static_cast<std::size_t>(q)] = e;
            }
        if (table.blobs[0].empty() || table.blobs[static_cast<std::size_t>(opt.rank)].empty())
            throw wire::Malformed("no blob for rank 0 or for this peer");
        set_clock(samples);
        started = true;
        install_first_view();
        absent_from_start(table.blobs);
        finish(std::move(table.blobs));
        start_heartbeats();
    } catch (const wire::Malformed& e) {
        lost(std::string("sent a malformed table: ") + e.what());
        co_return;
    }
    co_await watch(conn, 0, std::move(early));
}

void Bootstrap::Impl::set_clock(const std::vector<ClockSample>& samples) {
    ClockOffset c;
    try {
        c = estimate_offset(samples);
    } catch (const std::invalid_argument& e) {
        // Only a clock stepped back mid-exchange does this: the timeline falls back to the
        // hosts' clocks (samples = 0 says so), the job goes on.
        log::warn("{}: clock offset to {} not estimated: {}", name(opt.rank), name(0), e.what());
    }
    log::debug("{}: clock offset to {} {:+.0f} us, residual {:.0f} us ({} round trips)",
               name(opt.rank), name(0), c.offset_us, c.residual_us, c.samples);
    std::lock_guard lock(mu);
    clock = c;
}

}  // namespace gossamer::bootstrap
