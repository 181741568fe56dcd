#include "gossamer/optimizers/protocol/share_chunks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>

#include "gossamer/core/cluster.hpp"
#include "gossamer/core/error.hpp"

namespace gossamer::proto {

ChunkBytes parse_chunk_bytes(const json::Node& node) {
    ChunkBytes c;
    if (node.is_string()) {
        if (node.as_string() != "auto")
            node.fail(fmt::format("\"{}\" is not a chunk size", node.as_string()),
                      "use a number of bytes (at least 4) or \"auto\"");
        c.automatic = true;
        return c;
    }
    if (!node.is_number())
        node.fail("chunk_bytes must be a number of bytes or \"auto\"",
                  "use e.g. 1048576 or \"auto\"");
    c.bytes = static_cast<std::uint64_t>(node.as_int(4, INT64_MAX));
    return c;
}

void check_share_chunks(const ChunkBytes& option, std::size_t size) {
    if (option.automatic || option.bytes == 0) return;
    const std::uint64_t values = option.bytes / 4;
    const std::uint64_t chunks = (size + values - 1) / values;
    if (chunks > kMaxShareChunks)
        throw ConfigError(
            "", "chunk_bytes",
            fmt::format("{} bytes cut a share of {} values into {} chunks", option.bytes, size,
                        chunks),
            fmt::format("use chunks of at least 1/{} of the model ({} bytes), or "
                        "\"auto\"",
                        kMaxShareChunks, 4 * ((size + kMaxShareChunks - 1) / kMaxShareChunks)));
}

std::uint64_t auto_chunk_bytes(const Cluster* cluster, int from, int to) {
    if (!cluster || from < 0 || to < 0 || from >= cluster->n() || to >= cluster->n())
        return kAutoChunkUnknownLink;
    const LinkSpec& link = cluster->link(from, to);
    double bandwidth = link.bandwidth;
    const auto& sender = cluster->peers[static_cast<std::size_t>(from)];
    const auto& receiver = cluster->peers[static_cast<std::size_t>(to)];
    if (sender.uplink > 0) bandwidth = std::min(bandwidth, sender.uplink);
    if (receiver.downlink > 0) bandwidth = std::min(bandwidth, receiver.downlink);
    // latency <= 10% of latency + bytes / bandwidth  <=>  bytes >= 9 latency bandwidth.
    // (Rounding of the product is not a byte: 9 * 0.002 * 12.5e6 is 225,000.00000000003.)
    const double bytes = std::ceil(9.0 * link.latency * bandwidth * (1 - 1e-12));
    if (!(bytes < static_cast<double>(kAutoChunkMax))) return kAutoChunkMax;
    const auto b = static_cast<std::uint64_t>(bytes);
    return std::clamp((b + 3) / 4 * 4, kAutoChunkMin, kAutoChunkMax);
}

std::uint64_t chunk_bytes_for(const ChunkBytes& option, const Cluster* cluster, int from, int to) {
    return option.automatic ? auto_chunk_bytes(cluster, from, to) : option.bytes;
}

std::uint64_t job_chunk_bytes(const ChunkBytes& option, const Cluster* cluster,
                              const topology::Schedule& topology) {
    if (!option.automatic) return option.bytes;
    if (!cluster) return kAutoChunkUnknownLink;
    std::uint64_t most = kAutoChunkMin;
    for (const auto& e : topology.base_graph().edges())
        most = std::max(most, auto_chunk_bytes(cluster, e.from, e.to));
    return most;
}

void cut_share(Message m, std::uint64_t chunk_values, const std::function<void(Message)>& send) {
    const std::size_t size = m.elements;
    if (chunk_values == 0 || size <= chunk_values) return send(std::move(m));
    const bool values = !m.payload.empty();
    std::uint32_t index = 0;
    for (std::size_t at = 0; at < size; at += chunk_values, ++index) {
        const std::size_t len = std::min<std::size_t>(chunk_values, size - at);
        Message c;
        c.kind = m.kind;
        c.receiver = m.receiver;
        c.round = m.round;
        c.edge_seq = m.edge_seq;
        c.sent_at = m.sent_at;
        c.partition = m.partition;
        c.chunk = index;
        c.offset = at;
        c.elements = len;
        // The weight moves with the last range: until every value is there, no mass moves.
        c.weight = at + len == size ? m.weight : 0.0;
        if (values)
            c.payload.assign(m.payload.begin() + static_cast<std::ptrdiff_t>(at),
                             m.payload.begin() + static_cast<std::ptrdiff_t>(at + len));
        send(std::move(c));
    }
}

void post_share(Actions& out, Message m, std::uint64_t chunk_values, ShareOutbox* outbox,
                const std::function<void(Message)>& send) {
    const int to = m.receiver;
    if (outbox && !outbox->free(to)) return outbox->hold(std::move(m));
    const std::size_t first = out.sends.size();
    cut_share(std::move(m), chunk_values, send);
    if (!outbox) return;
    // A chunked share is one share in flight: the edge is free when its last chunk is done.
    std::vector<std::uint64_t> ids;
    ids.reserve(out.sends.size() - first);
    for (std::size_t k = first; k < out.sends.size(); ++k) ids.push_back(out.sends[k].id);
    outbox->sent(to, ids);
}

std::optional<Message> ShareAssembler::add(Message m) {
    const int from = m.sender;
    if (m.offset > size_ || m.elements > size_ - m.offset || m.elements == 0)
        throw Error(
            fmt::format("a share chunk from peer {} for values [{}, {}) of a model of {} values",
                        from, m.offset, m.offset + m.elements, size_));
    if (math_ && m.payload.size() != m.elements)
        throw Error(fmt::format("a share chunk from peer {} carries {} values for a range of {}",
                                from, m.payload.size(), m.elements));
    const std::pair key{from, m.edge_seq};
    auto it = open_.find(key);
    if (it == open_.end()) {
        Open o;
        o.share.kind = m.kind;
        o.share.sender = from;
        o.share.receiver = m.receiver;
        o.share.round = m.round;
        o.share.edge_seq = m.edge_seq;
        o.share.sent_at = m.sent_at;
        o.share.partition = m.partition;
        o.share.elements = size_;
        if (math_) o.share.payload.assign(size_, 0.0f);
        it = open_.emplace(key, std::move(o)).first;
    }
    Open& o = it->second;
    // A range that overlaps one already here would add mass twice: refused.
    const std::size_t begin = m.offset, end = m.offset + m.elements;
    const auto next = o.ranges.lower_bound(begin);
    const bool overlaps = (next != o.ranges.end() && next->first < end) ||
                          (next != o.ranges.begin() && std::prev(next)->second > begin);
    if (overlaps)
        throw Error(fmt::format("share {} from peer {}: values [{}, {}) came twice", m.edge_seq,
                                from, begin, end));
    o.ranges.emplace(begin, end);
    o.received += m.elements;
    // Copied, not added: the assembled share is bit for bit the share its sender cut.
    if (math_)
        std::copy(m.payload.begin(), m.payload.end(),
                  o.share.payload.begin() + static_cast<std::ptrdiff_t>(m.offset));
    o.share.weight += m.weight;
    if (o.received < size_) return std::nullopt;
    Message whole = std::move(o.share);
    open_.erase(it);
    return whole;
}

}  // namespace gossamer::proto
