#include "gossamer/transport/transport.hpp"

#include <fmt/format.h>

#include "gossamer/core/error.hpp"
#include "gossamer/core/log.hpp"

namespace gossamer::transport {

std::string_view to_string(Errc e) noexcept {
    switch (e) {
        case Errc::ok:
            return "ok";
        case Errc::timeout:
            return "timeout";
        case Errc::peer_failed:
            return "peer failed";
        case Errc::closed:
            return "closed";
    }
    return "?";
}

Transport::Transport(TransportOptions options) : options_(options) {
    if (options_.size < 1 || options_.rank < 0 || options_.rank >= options_.size)
        throw TransportError(
            fmt::format("transport: rank {} outside [0, {})", options_.rank, options_.size));
    if (options_.default_timeout <= Duration::zero())
        throw TransportError("transport: the default timeout must be positive");
    drop_logged_.assign(static_cast<std::size_t>(options_.size) + 1, 0);
    peer_status_.resize(static_cast<std::size_t>(options_.size));
}

const Status& Transport::peer_status(int peer) const noexcept {
    static const Status kUnknown{Errc::peer_failed, -1, "no such peer"};
    if (peer < 0 || peer >= options_.size) return kUnknown;
    return peer_status_[static_cast<std::size_t>(peer)];
}

bool Transport::set_failed(Status s) {
    if (s.peer < 0 || s.peer >= options_.size || s.peer == options_.rank) return false;
    auto& slot = peer_status_[static_cast<std::size_t>(s.peer)];
    if (!slot.ok()) return false;
    if (s.ok()) s.code = Errc::peer_failed;
    slot = s;
    // Not a warning: the transport's user reports the losses that matter (the driver while it
    // trains, the exact average, a stopped all-reduce). A neighbour closing after the job's end
    // also breaks its endpoints, and is no loss at all.
    log::debug("transport {}: rank {}: {} ({})", backend(), options_.rank, s.reason,
               to_string(s.code));
    notices_.push_back(std::move(s));
    return true;
}

void Transport::clear_failed(int peer) {
    if (peer < 0 || peer >= options_.size) return;
    peer_status_[static_cast<std::size_t>(peer)] = Status{};
    drop_logged_[static_cast<std::size_t>(peer)] = 0;
}

bool Transport::admit(std::span<const std::byte> header, int from, std::int64_t arrived,
                      Message& m) {
    HeaderExpectation expect;
    expect.job_id = options_.job_id;
    expect.receiver = options_.rank;
    expect.sender = from;
    expect.size = options_.size;
    expect.max_payload = options_.max_payload_bytes;
    auto check = decode_header(header, expect, arrived, m);
    if (check.ok) return true;
    drops_.add(check.reason);
    const auto slot = static_cast<std::size_t>(from + 1);
    const auto bit = 1u << static_cast<unsigned>(check.reason);
    const bool first = slot < drop_logged_.size() && !(drop_logged_[slot] & bit);
    if (first) drop_logged_[slot] |= bit;
    // UCX active messages do not say who sent them: name the sender the header claims.
    std::string who = fmt::format("peer {}", from);
    if (from < 0)
        who = header.size() >= 20 ? fmt::format("peer {} (as its header says)",
                                                std::to_integer<int>(header[16]) |
                                                    std::to_integer<int>(header[17]) << 8)
                                  : std::string("an unknown peer");
    if (first || log::enabled(log::Level::debug))
        log::write(
            first ? log::Level::warn : log::Level::debug,
            fmt::format("transport {}: rank {} dropped a message from {}: {} ({})", backend(),
                        options_.rank, who, to_string(check.reason), check.detail));
    return false;
}

void Transport::defer(SendCallback cb, Status status) {
    deferred_.emplace_back(std::move(cb), std::move(status));
}

std::size_t Transport::run_deferred() {
    std::size_t told = notices_.size();
    if (told) {
        auto notices = std::move(notices_);
        notices_.clear();
        for (auto& s : notices)
            if (on_failed_) on_failed_(s);
    }
    if (deferred_.empty()) return told;
    running_.clear();
    running_.swap(deferred_);
    for (auto& [cb, status] : running_)
        if (cb) cb(status);
    const auto n = running_.size();
    running_.clear();
    return n + told;
}

Status Transport::failure(Errc code, int peer, std::string_view why) {
    return Status{code, peer, fmt::format("peer {}: {}", peer, why)};
}

bool progress_until(Transport& t, const std::function<bool()>& pred, Duration timeout) {
    // The clock is read every 8 waits (each ends at work or after 10 ms), not on every event.
    const auto end = Clock::now() + timeout;
    for (unsigned i = 1; !pred(); ++i) {
        Duration slice(10);
        if (i % 8 == 0) {
            const auto now = Clock::now();
            if (now >= end) return pred();
            slice = std::min(slice, std::chrono::duration_cast<Duration>(end - now) + Duration(1));
        }
        t.wait(slice);
    }
    return true;
}

}  // namespace gossamer::transport
