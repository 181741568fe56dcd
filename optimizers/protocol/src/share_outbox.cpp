#include "gossamer/optimizers/protocol/share_outbox.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "gossamer/core/error.hpp"

namespace gossamer::proto {

bool ShareOutbox::free(int to) const {
    auto it = edges_.find(to);
    return it == edges_.end() || !it->second.busy();
}

std::size_t ShareOutbox::in_flight() const {
    return static_cast<std::size_t>(
        std::count_if(edges_.begin(), edges_.end(), [](const auto& e) { return e.second.busy(); }));
}

void ShareOutbox::sent(int to, std::span<const std::uint64_t> ids) {
    Edge& e = edges_[to];
    if (e.busy())
        throw Error(
            fmt::format("outbox: a second share on the edge to peer {} while send {} is "
                        "in flight",
                        to, e.first()));
    if (ids.size() == 1 && ids[0] != 0) {  // a whole share (send ids start at 1)
        e.one = ids[0];
        return;
    }
    if (ids.empty()) return;
    if (!e.chunks) e.chunks = std::make_unique<std::vector<std::uint64_t>>();
    e.chunks->assign(ids.begin(), ids.end());
}

void ShareOutbox::hold(Message m) {
    Edge& e = edges_[m.receiver];
    if (!e.waiting) {
        e.waiting = std::make_unique<Message>(std::move(m));
        ++pending_;
        return;
    }
    Message& w = *e.waiting;
    if (w.payload.size() != m.payload.size())
        throw Error(fmt::format("outbox: shares to peer {} of {} and {} values", m.receiver,
                                w.payload.size(), m.payload.size()));
    // Mass adds: the receiver absorbs the sum exactly as it would the two shares one by one.
    for (std::size_t k = 0; k < w.payload.size(); ++k) w.payload[k] += m.payload[k];
    w.weight += m.weight;
    w.round = m.round;
    w.edge_seq = m.edge_seq;
    w.sent_at = std::min(w.sent_at, m.sent_at);
    ++merged_;
}

std::optional<Message> ShareOutbox::completed(std::uint64_t id) {
    // A peer has a few out-edges: a scan beats a second index.
    if (id == 0) return std::nullopt;
    for (auto& [to, e] : edges_) {
        if (e.one == id) {
            e.one = 0;
        } else {
            if (!e.chunks) continue;
            const auto at = std::find(e.chunks->begin(), e.chunks->end(), id);
            if (at == e.chunks->end()) continue;
            e.chunks->erase(at);
        }
        if (e.busy() || !e.waiting) return std::nullopt;
        std::optional<Message> m = std::move(*e.waiting);
        e.waiting.reset();
        --pending_;
        return m;
    }
    return std::nullopt;
}

std::optional<Message> ShareOutbox::take(int to) {
    auto it = edges_.find(to);
    if (it == edges_.end() || !it->second.waiting) return std::nullopt;
    std::optional<Message> m = std::move(*it->second.waiting);
    it->second.waiting.reset();
    --pending_;
    return m;
}

double ShareOutbox::pending_weight() const {
    double w = 0;
    for (const auto& [to, e] : edges_)
        if (e.waiting) w += e.waiting->weight;
    return w;
}

}  // namespace gossamer::proto
