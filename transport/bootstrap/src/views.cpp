// Views (docs/modules/bootstrap.md, "Views"): rank 0 proposes the membership without the peers it
// lost, installs it once a strict majority of the previous view acknowledged it, and tells a peer
// it declared lost so. Bootstrap thread, except the public accessors at the end.
#include <fmt/format.h>

#include <algorithm>

#include "gossamer/core/log.hpp"
#include "gossamer/core/ranks_text.hpp"
#include "impl.hpp"

namespace gossamer::bootstrap {

bool View::contains(int rank) const {
    return std::binary_search(members.begin(), members.end(), rank);
}

namespace {

wire::Notice view_notice(const View& v) {
    wire::Notice n;
    n.code = static_cast<std::uint32_t>(v.number);
    for (int r : v.members) n.ranks.push_back(static_cast<std::uint32_t>(r));
    return n;
}

View view_of(const wire::Notice& notice) {
    View v;
    v.number = notice.code;
    for (auto r : notice.ranks) v.members.push_back(static_cast<int>(r));
    std::sort(v.members.begin(), v.members.end());
    v.members.erase(std::unique(v.members.begin(), v.members.end()), v.members.end());
    return v;
}

}  // namespace

void Bootstrap::Impl::send_view(int rank, wire::Kind kind, const View& v) {
    if (silenced) return;  // a hung process sends nothing (Fault::silence)
    auto& m = members[static_cast<std::size_t>(rank)];
    if (m && !gone[static_cast<std::size_t>(rank)])
        m->send(wire::frame(kind, wire::encode(view_notice(v))));
}

void Bootstrap::Impl::propose_view(bool quiet) {
    if (!is_coord() || stopping) return;
    const bool pending = proposal.has_value();
    View next;
    {
        std::lock_guard lock(mu);
        next = proposal ? *proposal : view;
        next.number = std::max(view.number, proposal ? proposal->number : 0) + 1;
    }
    std::erase_if(next.members, [&](int r) { return gone[static_cast<std::size_t>(r)]; });
    for (int r : admitted)
        if (!gone[static_cast<std::size_t>(r)] && !next.contains(r)) {
            next.members.push_back(r);
            std::sort(next.members.begin(), next.members.end());
        }
    proposal = next;
    // Goodbyes at the end of a job shrink the view too, without a line each.
    quiet_proposal = quiet && (!pending || quiet_proposal);
    acks.assign(static_cast<std::size_t>(n), false);
    acks[static_cast<std::size_t>(opt.rank)] = true;
    log::debug("{}: proposes view {}: ranks {}", name(opt.rank), next.number,
               ranks_text(next.members));
    for (int r : next.members)
        if (r != opt.rank) send_view(r, wire::Kind::view_propose, next);
    check_view();
}

void Bootstrap::Impl::on_view_ack(int rank, const wire::Notice& notice) {
    if (!proposal || notice.code != static_cast<std::uint32_t>(proposal->number) ||
        !proposal->contains(rank))
        return;  // an answer to an older proposal
    acks[static_cast<std::size_t>(rank)] = true;
    check_view();
}

void Bootstrap::Impl::check_view() {
    if (!proposal) return;
    std::size_t acked = 0, needed = 0;
    {
        std::lock_guard lock(mu);
        needed = view.members.size() / 2 + 1;
    }
    {
        // Only members of the installed view vote; a rank joining votes from the next one on.
        std::lock_guard lock(mu);
        for (int r : proposal->members)
            acked += acks[static_cast<std::size_t>(r)] && view.contains(r) ? 1 : 0;
    }
    if (acked < needed) return;
    View installed = *proposal;
    proposal.reset();
    announce_joins(installed);
    {
        std::lock_guard lock(mu);
        view = installed;
    }
    cv.notify_all();
    log::write(quiet_proposal ? log::Level::debug : log::Level::info,
               fmt::format("{}: view {} installed: ranks {} ({} of the previous view acknowledged "
                           "it)",
                           name(opt.rank), installed.number, ranks_text(installed.members), acked));
    quiet_proposal = true;
    for (int r : installed.members)
        if (r != opt.rank && !readmitting.contains(r))
            send_view(r, wire::Kind::view_install, installed);
    expel_excluded(installed);
    // Losses held while this coordinator heard nobody: a majority has confirmed them now.
    std::erase_if(held_relays, [&](const std::pair<int, wire::Bytes>& h) {
        if (installed.contains(h.first)) return false;
        for (int r : installed.members) {
            auto& m = members[static_cast<std::size_t>(r)];
            if (r != opt.rank && m && !gone[static_cast<std::size_t>(r)]) m->send(h.second);
        }
        return true;
    });
}

void Bootstrap::Impl::answer_query(int rank) {
    View v;
    {
        std::lock_guard lock(mu);
        v = view;
    }
    send_view(rank, wire::Kind::view_install, v);
}

void Bootstrap::Impl::on_view_frame(const Frame& f) {
    wire::Notice notice;
    try {
        notice =
            f.header.kind == wire::Kind::view_query ? wire::Notice{} : wire::decode_notice(f.body);
    } catch (const wire::Malformed& e) {
        log::warn("{}: a malformed view frame from {}: {}", name(opt.rank), name(coord), e.what());
        return;
    }
    switch (f.header.kind) {
        case wire::Kind::view_propose: {
            // A hung process acknowledges nothing (the silence fault stands for one).
            const View v = view_of(notice);
            if (silenced || !v.contains(opt.rank)) return;
            wire::Notice ack;
            ack.code = notice.code;
            auto& c = members[static_cast<std::size_t>(coord)];
            if (c) c->send(wire::frame(wire::Kind::view_ack, wire::encode(ack)));
            return;
        }
        case wire::Kind::view_install: {
            View v = view_of(notice);
            {
                std::lock_guard lock(mu);
                if (v.number >= view.number) view = std::move(v);
                ++view_answers;
            }
            cv.notify_all();
            return;
        }
        case wire::Kind::expelled: {
            {
                std::lock_guard lock(mu);
                expelled_line = notice.text;
            }
            cv.notify_all();
            log::warn("{}: {}, the job's coordinator, declared this peer lost: {}", name(opt.rank),
                      name(coord), notice.text);
            return;
        }
        default:
            return;
    }
}

View Bootstrap::agreed_view() const {
    std::lock_guard lock(impl_->mu);
    return impl_->view;
}

std::optional<std::string> Bootstrap::expelled() const {
    std::lock_guard lock(impl_->mu);
    return impl_->expelled_line;
}

Standing Bootstrap::confirm_membership(Millis timeout) {
    Impl& m = *impl_;
    const auto deadline = Clock::now() + timeout;
    std::unique_lock lock(m.mu);
    if (m.expelled_line) return Standing::expelled;
    if (m.coord == m.opt.rank) {
        // Nobody to ask: the others' resets (they close the connections of a coordinator they
        // declared lost) arrive within an interval; a majority of the view still there says
        // this peer is still the job. A peer that left on purpose (it finished and said
        // goodbye) is no sign of a cut: after a pause of the whole job the fast peers may
        // finish first.
        m.cv.wait_until(lock, std::min(deadline, Clock::now() + m.opt.heartbeat_interval),
                        [&] { return m.io_stopped; });
        std::size_t there = 0;
        for (int r : m.view.members)
            there += std::none_of(m.losses.begin(), m.losses.end(),
                                  [r](const PeerLoss& l) { return l.rank == r && !l.left; });
        return there >= m.view.members.size() / 2 + 1 ? Standing::member : Standing::unknown;
    }
    // Between losing a coordinator and following the next one, wait for the next.
    m.cv.wait_until(lock, deadline, [&] {
        return !m.root_lost || m.expelled_line || m.io_stopped || m.coord == m.opt.rank;
    });
    if (m.expelled_line) return Standing::expelled;
    if (m.root_lost || m.io_stopped) return Standing::unknown;
    if (m.coord == m.opt.rank) {
        lock.unlock();
        return confirm_membership(std::chrono::duration_cast<Millis>(
            std::max(deadline - Clock::now(), Clock::duration::zero())));
    }
    const auto asked = m.view_answers;
    lock.unlock();
    asio::post(m.io, [&m] {
        auto& c = m.members[static_cast<std::size_t>(m.coord)];
        if (c && !m.gone[static_cast<std::size_t>(m.coord)])
            c->send(wire::frame(wire::Kind::view_query));
    });
    lock.lock();
    m.cv.wait_until(lock, deadline, [&] {
        return m.view_answers > asked || m.expelled_line || m.root_lost || m.io_stopped;
    });
    if (m.expelled_line) return Standing::expelled;
    if (m.view_answers > asked)
        return m.view.contains(m.opt.rank) ? Standing::member : Standing::expelled;
    return Standing::unknown;
}

}  // namespace gossamer::bootstrap
