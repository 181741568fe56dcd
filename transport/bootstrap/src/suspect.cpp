// Failures only a transport saw (docs/modules/bootstrap.md, "Transport failures"): a peer whose
// transport failed a neighbour on its own (a send that timed out on a cut edge, an endpoint that
// broke) tells rank 0, which turns the report into a loss every member agrees on. Without it the
// two ends of a cut edge fail each other while rank 0, whose heartbeats still reach both, declares
// nobody lost, and the survivors' sets differ. Bootstrap thread, except report_failure().
#include <fmt/format.h>

#include "gossamer/core/log.hpp"
#include "impl.hpp"

namespace gossamer::bootstrap {

void Bootstrap::report_failure(int rank, std::string why) {
    asio::post(impl_->io, [impl = impl_.get(), rank, why = std::move(why)] {
        impl->report_failure(rank, why);
    });
}

void Bootstrap::Impl::report_failure(int rank, const std::string& why) {
    if (stopping || !started || silenced || rank < 0 || rank >= n || rank == opt.rank) return;
    if (is_coord()) {
        judge_later(opt.rank, rank, why);
        return;
    }
    auto& c = members[static_cast<std::size_t>(coord)];
    if (root_lost || !c || gone[static_cast<std::size_t>(coord)]) {
        // Between coordinators: told to the next one once this peer follows it.
        held_reports.emplace_back(rank, why);
        return;
    }
    log::debug("{}: reports to {} that its transport failed {}: {}", name(opt.rank), name(coord),
               name(rank), why);
    c->send(wire::frame(wire::Kind::suspect,
                        wire::encode(wire::Notice{static_cast<std::uint32_t>(rank), {}, why})));
}

void Bootstrap::Impl::on_suspect(int reporter, const Frame& f) {
    wire::Notice notice;
    try {
        notice = wire::decode_notice(f.body);
    } catch (const wire::Malformed& e) {
        log::warn("{}: a malformed failure report from {}: {}", name(opt.rank), name(reporter),
                  e.what());
        return;
    }
    if (notice.code >= static_cast<std::uint32_t>(n) ||
        notice.code == static_cast<std::uint32_t>(reporter)) {
        log::warn("{}: ignored a failure report from {} about rank {} (not another member)",
                  name(opt.rank), name(reporter), notice.code);
        return;
    }
    judge_later(reporter, static_cast<int>(notice.code), notice.text);
}

// One heartbeat interval of grace: a peer that is ending its job closes its transport just before
// its goodbye, so a neighbour's broken endpoint can be reported a moment before the goodbye
// arrives; after the grace such a report finds the peer gone (left) and is dropped.
void Bootstrap::Impl::judge_later(int reporter, int suspect, std::string why) {
    auto timer = std::make_shared<asio::steady_timer>(io);
    timer->expires_after(opt.heartbeat_interval);
    // A peer that joined again meanwhile is another process: the report was about the old one.
    const auto seen = std::pair{incarnation[static_cast<std::size_t>(reporter)],
                                incarnation[static_cast<std::size_t>(suspect)]};
    timer->async_wait(
        [this, timer, reporter, suspect, seen, why = std::move(why)](boost::system::error_code ec) {
            if (ec || seen != std::pair{incarnation[static_cast<std::size_t>(reporter)],
                                        incarnation[static_cast<std::size_t>(suspect)]})
                return;
            judge(reporter, suspect, why);
        });
}

// Rank 0. The edge between reporter and suspect failed while both still reach rank 0: the job
// keeps one of them. The suspect goes, unless it is rank 0 itself (the views and the relay of
// losses live there), in which case the reporter does. Either way it is one decision, made in
// one place, that every member learns (peer_gone, then a view without it).
void Bootstrap::Impl::judge(int reporter, int suspect, const std::string& why) {
    if (stopping || !is_coord() || gone[static_cast<std::size_t>(reporter)] ||
        gone[static_cast<std::size_t>(suspect)])
        return;
    if (suspect == opt.rank) {
        lose(reporter,
             fmt::format("{} cannot reach {} over the transport ({}) while its heartbeats still "
                         "arrive; the job keeps its coordinator, so {} is declared lost",
                         name(reporter), name(opt.rank), why, name(reporter)),
             true);
        return;
    }
    lose(
        suspect,
        fmt::format("{} declared lost: {}'s transport failed it ({}) while its heartbeats still "
                    "arrive at {}",
                    name(suspect), reporter == opt.rank ? std::string("this peer") : name(reporter),
                    why, name(opt.rank)),
        true);
}

}  // namespace gossamer::bootstrap
